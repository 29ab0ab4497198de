"""Which stateful operator wrote a query's checkpoint, as Spark records it (and checks at every
restart): PySpark's row-based processor is `transformWithStateInPySparkExec`, the pandas one
`transformWithStateInPandasExec`."""
from __future__ import annotations

import json
from pathlib import Path

ROW_PROCESSOR = "transformWithStateInPySparkExec"
PANDAS_PROCESSOR = "transformWithStateInPandasExec"


def state_operators(query_checkpoint: Path) -> set[str]:
    """The operator names in every version of the checkpoint's state metadata."""
    names = set()
    for f in (query_checkpoint / "state" / "0" / "_metadata" / "v2").iterdir():
        if f.name.isdigit():
            body = f.read_text().split("\n", 1)[1]  # a version line, then the JSON
            names.add(json.loads(body.splitlines()[0])["operatorInfo"]["operatorName"])
    return names
