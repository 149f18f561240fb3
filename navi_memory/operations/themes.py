"""A user's themes: listed with their active-item counts, and named and described by the user.

A theme exists once an item is filed under it (``general`` when none is given) or once
``set_theme`` names it. Its optional description says what belongs there; the agent reads it
with the theme hints of the tool-driven prompt and in ``memory_list_themes``.
"""

from __future__ import annotations

from ..calls import db
from ..core import validation as v
from ..models import Theme
from ..sansio import Op, operation
from .reads import item_scope
from .shared import Shared

MAX_DESCRIPTION = 2048  # bytes of UTF-8: a few sentences (the prompt shows the first ones)


class ThemeOperations:
    """Themes of a user's memory."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    @operation
    def list_themes(self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> Op[list[Theme]]:
        """Themes (slug, display name, description, active-item count), largest first. ``agent_id`` /
        ``run_id``: count only the items written in that scope, and list only the themes holding one."""
        rows = yield db.list_themes(user_id=v.user_id(user_id), now=self._shared.now(),
                                    scope=item_scope(agent_id, run_id))
        return [Theme(**r) for r in rows]

    @operation
    def set_theme(self, slug: str, *, user_id: str, display_name: str | None = None,
                  description: str | None = None) -> Op[Theme]:
        """Name or describe a theme (created if missing; ``slug`` as an item's theme); the ``Theme``. None
        leaves a field, ``description=""`` clears it. The agent reads the description (what belongs
        there) with the theme hints and in ``memory_list_themes``."""
        uid = v.user_id(user_id)
        theme = v.slug(slug)
        changes: dict[str, str | None] = {}
        if display_name is not None:
            changes["display_name"] = v.text(display_name, "display_name", v.MAX_KEY)
        if description is not None:
            changes["description"] = v.optional_text(description, "description", MAX_DESCRIPTION)
        return Theme(**(yield db.set_theme(user_id=uid, slug=theme, changes=changes, now=self._shared.now())))
