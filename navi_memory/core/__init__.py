"""Pure rules shared by operations, backends and doors; no I/O, no driver, no framework.

``validation`` (what input is accepted), ``contract`` (what operations and both backends agree
on: the embedding text, fact item content, source confidences, person columns, sort fields),
``convert`` (stored rows to public models), ``timeutil`` (timestamps to and from the database),
``persons`` (household and person resolution), ``keyed`` (namespaces of keyed items), ``filters``
(metadata filters and their meaning), ``timeline`` (where a statement goes in a fact's timeline).
"""
