"""Which conformance cases ran nodes on the reference backend (onnx.reference), and which op types.

ConformanceBackend.prepare calls record(session) for every session a case creates; the entry is keyed by the running
test's node id (PYTEST_CURRENT_TEST). conftest.py moves it onto the test's report (user_properties, which pytest-xdist
carries from a worker to the controller), so the summary can say how many passes did not test onnxep alone."""
from __future__ import annotations

import os
from collections import Counter

from onnxep._zoo import reference_ops

#: pytest node id -> Counter(op type -> nodes of that type placed on the reference backend, and CPU_NODES -> nodes
#: placed on the cpu backend)
ON_REFERENCE: dict[str, Counter] = {}
#: the key that counts a case's nodes on the cpu backend (not an op type)
CPU_NODES = "(cpu nodes)"


def current_test() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


def record(session) -> None:
    ops = reference_ops(session)    # the plans and node_assignment disagreeing count as "?"
    n_ref = sum(1 for b in session.node_assignment.values() if b == "reference")
    ops[CPU_NODES] += len(session.node_assignment) - n_ref
    for plan in _body_plans(session.plans):     # nodes of If / Loop / Scan / SequenceMap bodies the cpu backend runs
        if plan.backend_name == "reference":
            ops.update(plan.op_types)
    ON_REFERENCE.setdefault(current_test(), Counter()).update(ops)


def _body_plans(plans):
    """The plans of every compiled body (onnxep/ops/control/_body.Body) held by a kernel of these plans, nested bodies
    included."""
    from onnxep.ops.control._body import Body
    for plan in plans:
        for step in getattr(plan, "steps", ()):
            for v in getattr(step[0], "__dict__", {}).values():
                if isinstance(v, Body) and v.executor is not None:
                    yield from v.executor.plans
                    yield from _body_plans(v.executor.plans)


def pop(nodeid: str):
    """The op-type counts recorded for a test (None if it created no session), removed from the registry."""
    return ON_REFERENCE.pop(nodeid, None)
