"""The suite. Its folders mirror the code they test: one folder per package of ``analysis/``
(``hlo``, ``codegen``, ``program``, ``timing``, ``devices``, ``fusion``, ``bundle``, ``inputs``,
``studies``, ``compile``, ``service``, ``render``), ``ground`` for the ground floor's modules,
``pipeline`` and ``cli`` for those of ``analysis/``'s root, ``app`` and ``xla_explorer`` for the
two front ends, ``scenarios`` for whole journeys (real programs, the gallery, the app in a real
browser) and ``hostile`` for the red team's cases. Every folder is a package, so a test module is
imported as ``tests.<folder>.<module>`` by pytest and by the tests that share its helpers alike.
The helpers every test may import stay here: ``polling`` (every wait), ``paths``, ``presentation``,
``stack_hlo``, and the data in ``fixtures/`` and ``real_programs/``."""
