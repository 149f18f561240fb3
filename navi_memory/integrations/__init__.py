"""Framework adapters: ``navi_memory.integrations.langchain`` and ``navi_memory.integrations.llamaindex``.

Each needs its framework installed (the ``langchain`` / ``llamaindex`` extras); importing
``navi_memory`` itself never loads them. The adapters only call store methods: searching,
ranking and storage stay in the store.
"""
