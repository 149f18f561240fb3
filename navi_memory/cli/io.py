"""``navi-memory export`` and ``navi-memory import`` (a file, or ``--from-navi`` an existing Navi
database). The format is described in docs/export-format.md."""

from __future__ import annotations

import argparse
import glob
import os
import secrets
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..errors import ValidationError
from ..progress import Progress
from ..transfer_format import dumps, parse_user_map
from .common import AddCommand, integer, json_option, print_json


def open_store(args: argparse.Namespace, read_only: bool = False) -> Any:
    from ..store import MemoryStore

    return MemoryStore.open(args.db, args.embeddings, chat_model=False, read_only=read_only)


def cmd_export(args: argparse.Namespace) -> None:
    if args.format == "markdown":  # facts and pinned notes as a MEMORY.md, for assistants that read a file
        if not args.user or args.all_users or args.with_vectors:
            raise ValidationError("--format markdown exports one --user (no --all-users, no --with-vectors)")
        from .persons import cmd_memory_md

        cmd_memory_md(args)
        return
    if bool(args.user) == bool(args.all_users):
        raise ValidationError("give --user U or --all-users")
    to_terminal = not args.output and sys.stdout.isatty()  # a bar would tear the records it shows
    with open_store(args, read_only=True) as store, \
            Progress("export", unit="records", enabled=not to_terminal) as bar:
        def export(out: Any) -> Any:
            written = 0

            def write(record: Any) -> None:
                nonlocal written
                out.write(dumps(record) + "\n")
                if "type" in record:  # the header is not a record
                    written += 1
                    bar(written)

            return store.export(write, user_id=args.user, all_users=args.all_users, with_vectors=args.with_vectors)

        report = _write_whole(args.output, export) if args.output else export(sys.stdout)
    print(f"exported {report.records} records: " + ", ".join(f"{n} {k}" for k, n in report.added.items()),
          file=sys.stderr)


def _write_whole(path: str, write: Callable[[Any], Any]) -> Any:
    """``write(file)`` into a temporary file beside ``path``, renamed over it only when complete:
    a failed export never empties or truncates an existing backup. The temporary file is readable
    by its owner only (it holds a user's memory); one a killed export left is removed by the next
    export to the same target (``_remove_stale_partials``). A symbolic link is followed, as the
    shell's ``>`` does: the file it points to is replaced, the link stays."""
    target = Path(path).expanduser()
    if target.is_symlink():  # replacing the link itself would leave the file it names stale
        try:
            target = target.resolve()
        except (OSError, RuntimeError) as exc:  # a loop of links (RuntimeError before Python 3.13)
            raise ValidationError(f"cannot write {target}: {exc}") from exc
    if not target.parent.is_dir():
        raise ValidationError(f"cannot write {target}: the folder {target.parent} does not exist")
    _remove_stale_partials(target)
    partial = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    try:
        mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else 0o600
        with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
            result = write(out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(partial, mode)  # an existing backup keeps the mode its owner gave it
        os.replace(partial, target)
    except OSError as exc:
        raise ValidationError(f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return result


def _remove_stale_partials(target: Path) -> None:
    """Delete the temporary files of exports to ``target`` whose process is gone (killed before
    its ``finally`` ran); those of live processes, this one's included, are left alone."""
    for leftover in target.parent.glob(f".{glob.escape(target.name)}.*.partial"):
        pid = leftover.name[len(target.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            leftover.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill would end the process there: keep the file
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process (PermissionError), or no way to tell: keep its file
        return True
    return True


def _report(report: Any, as_json: bool, extra: dict[str, Any] | None = None) -> None:
    if as_json:
        print_json({**report.to_dict(), **(extra or {})})
        return
    print("added: " + (", ".join(f"{n} {k}" for k, n in report.added.items()) or "nothing"))
    if report.skipped:
        print("already there (skipped): " + ", ".join(f"{n} {k}" for k, n in report.skipped.items()))
    if report.unknown:
        print(f"records of unknown types ignored: {report.unknown}")
    print(f"embedded {report.embedded}" + (f", {report.embed_failed} failed (run `navi-memory backfill`)"
                                           if report.embed_failed else ""))
    for key, value in (extra or {}).items():
        print(f"{key}: {value}")


def _lines(path: str) -> int | None:
    """Non-blank lines of the file: the total of the reading passes (None when unreadable: the
    import itself reports why)."""
    try:
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return None


def _counted(source: Any, total: int | None) -> Any:
    """``source`` (a re-readable ``Lines``) with a progress bar per pass: the import reads it once
    to check every record, then again to write."""
    passes = iter(("import: checking", "import: writing"))

    def lines() -> Any:
        with Progress(next(passes, "import: writing again"), total, unit="lines") as bar:
            for done, pair in enumerate(source(), 1):
                bar(done)
                yield pair

    return lines


def cmd_import(args: argparse.Namespace) -> None:
    user_map = parse_user_map(args.user_map)
    if (args.file is None) == (args.from_navi is None):
        raise ValidationError("give an export FILE or --from-navi URL")
    if args.from_navi is not None:
        _import_navi(args, user_map)
        return
    from ..operations.transfer import read_jsonl

    if args.id_map:
        _check_id_map(args.id_map, args.file)
    ids: list[str] = []
    with tempfile.TemporaryDirectory(prefix="navi-memory-import-") as folder:
        path = args.file
        if path == "-":  # read twice (check, then write): keep standard input in a file, bytes as given
            path = f"{folder}/stdin.jsonl"
            with open(path, "wb") as spool:
                shutil.copyfileobj(sys.stdin.buffer, spool)
        with open_store(args) as store, Progress("import: embedding") as embedding:
            report = store.import_records(
                _counted(read_jsonl(path), _lines(path)), user_map=user_map, batch_size=args.batch_size,
                embed=not args.no_embed, skip_unknown=args.skip_unknown, progress=embedding,
                id_map=lambda user, old, new: ids.append(dumps({"user_id": user, "exported_id": old, "id": new}) + "\n"))
    if args.id_map:  # written once the import is in: a failed import leaves an earlier map whole
        _write_whole(args.id_map, lambda out: out.writelines(ids))
    _report(report, args.json)


def _check_id_map(id_map: str, source: str) -> None:
    """Refused before anything is imported: a map that could not be written after, or one that
    would overwrite the file being imported."""
    target = Path(id_map).expanduser()
    if target.is_dir() or not target.parent.is_dir():
        raise ValidationError(f"cannot write the id map {target}: "
                              + ("it is a folder" if target.is_dir() else f"the folder {target.parent} does not exist"))
    if source != "-" and target.exists() and Path(source).exists() and os.path.samefile(target, source):
        raise ValidationError(f"the id map {target} is the file being imported: give another path")


def _import_navi(args: argparse.Namespace, user_map: dict[str, str]) -> None:
    from ..navi_source import NaviSource

    source = NaviSource(args.from_navi, user=args.navi_user)
    with open_store(args) as store:
        report = store.import_records(_counted(source, None), user_map=user_map, batch_size=args.batch_size,
                                      embed=False)
        extra: dict[str, Any] = {"rows not imported": source.skipped or "none"}
        if not args.no_embed and store.embedding_model is not None:
            with Progress("backfill") as bar:
                extra["backfill"] = store.backfill(progress=bar).to_dict()
    _report(report, args.json, extra)


def add_commands(command: AddCommand) -> None:
    """Register export and import on the main parser (``command`` is ``build_parser``'s helper)."""
    p = command("export", cmd_export, "write a user's memory (or everyone's) as JSON Lines")
    p.add_argument("--user", help="the user to export")
    p.add_argument("--all-users", action="store_true", help="export every user (admin)")
    p.add_argument("--with-vectors", action="store_true", help="include embedding vectors (else re-embedded on import)")
    p.add_argument("--output", "-o", help="write to this file instead of standard output")
    p.add_argument("--format", choices=("jsonl", "markdown"), default="jsonl",
                   help="jsonl: everything (default); markdown: the user's facts and pinned notes as a MEMORY.md")
    p.add_argument("--limit", type=integer("limit"), default=100, help="markdown: facts at most (default 100)")
    p = command("import", cmd_import, "import an export file, or migrate an existing Navi database")
    json_option(p)
    p.add_argument("file", nargs="?", metavar="FILE", help="export file (JSON Lines), or - for standard input")
    p.add_argument("--from-navi", metavar="URL", help="migrate a Navi database (sqlite:///navi.db, a path, or postgresql://...)")
    p.add_argument("--navi-user", help="with --from-navi: user of rows that have none (Navi's SQLite flavour)")
    p.add_argument("--user-map", action="append", metavar="OLD=NEW", help="import user OLD as NEW (repeatable)")
    p.add_argument("--batch-size", type=integer("batch_size"), default=500, help="records per transaction")
    p.add_argument("--no-embed", action="store_true", help="do not embed now (run `navi-memory backfill` later)")
    p.add_argument("--skip-unknown", action="store_true", help="ignore record types this version does not know")
    p.add_argument("--id-map", metavar="FILE", help="write the new id of each added item (JSON Lines:"
                                                   " user_id, exported_id, id)")
