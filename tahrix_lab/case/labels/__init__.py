"""The label library: attribution from public lists, commercial exports and analysts, shared by cases.

``load_labels(db, paths, source=…)`` reads label files recognised by content
(``formats``) into the workspace's ``label_library``; ``find`` and ``sources`` answer
questions about it; every case reads its addresses' labels through the ``case_labels``
view (docs/case.md "Label library").
"""

from tahrix_lab.case.labels.library import cite, find, sources
from tahrix_lab.case.labels.loaders import FileLabels, LabelLoadReport, load_labels

__all__ = ["FileLabels", "LabelLoadReport", "cite", "find", "load_labels", "sources"]
