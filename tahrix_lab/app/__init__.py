"""The composition root: the ``tahrix`` CLI (``cli``, ``commands/``), the offline demo,
and the join of the case domain with the job service (``case_service``, and the service
page with its data routes: ``workplace``). It may import every layer; no layer imports it."""
