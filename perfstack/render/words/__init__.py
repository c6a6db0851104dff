"""The words every format shares, one module a concept under the stem of its view
(``compile``, ``modules``, ``memory``, ``device``); ``common`` holds the sentences of the
whole report (the answer, the header, the layers)."""
