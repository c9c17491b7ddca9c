"""The plugin ABI's slot numbers against onnxruntime's own static_assert anchors (tests/ort_plugin/abi_anchors.json).

Oracle: the anchors onnxruntime asserts in its sources (offsetof(OrtApi, X) / sizeof(void*) == N); the values checked
are offsetof() as compiled into each kernel variant from onnxep/_native/ort_plugin_abi.h (a wrong slot crashes at run
time, so this runs without onnxruntime installed).
"""

import importlib
import json
import pathlib

import pytest

ANCHORS = json.loads((pathlib.Path(__file__).with_name("abi_anchors.json")).read_text())


def _variants():
    out = []
    for isa in ("generic", "avx2", "avx512"):
        try:
            out.append(importlib.import_module("onnxep._kernels_" + isa))
        except ImportError:
            pass
    return out


VARIANTS = _variants()


@pytest.fixture(params=VARIANTS, ids=lambda m: m.ISA_NAME)
def slots(request):
    return request.param.ort_abi_slots()


@pytest.mark.parametrize("api", ["OrtApi", "OrtEpApi"])
def test_anchored_slots(slots, api):
    for name, slot in ANCHORS[api].items():
        assert slots[(api, name)] == slot, f"{api}.{name}: header slot {slots[(api, name)]}, onnxruntime {slot}"


@pytest.mark.parametrize("api", ["OrtApi", "OrtEpApi"])
def test_version_24_ends_where_onnxruntime_says(slots, api):
    """Every slot is declared up to version 24's last one, and none after it (ort_version_supported = 24)."""
    last = ANCHORS["last_slot_of_version_24"][api]
    ours = sorted(s for (t, _), s in slots.items() if t == api)
    assert ours == list(range(ANCHORS[api][last] + 1))


@pytest.mark.parametrize("struct", ["OrtKernelImpl", "OrtEp", "OrtEpFactory"])
def test_filled_struct_layouts(slots, struct):
    """Member order of the structs the plugin fills, version 24 (slot 0 holds the uint32_t version field(s))."""
    members = ANCHORS["layouts"][struct]
    for slot, name in enumerate(members):
        if slot == 0:
            continue
        assert slots[(struct, name)] == slot, f"{struct}.{name}"
    assert max(s for (t, _), s in slots.items() if t == struct) == len(members) - 1


def test_model_editor_create_node_slot(slots):
    """OrtModelEditorApi.CreateNode, which OrtEp::Compile calls to return EPContext nodes."""
    assert slots[("OrtModelEditorApi", "CreateNode")] == ANCHORS["OrtModelEditorApi"]["CreateNode"]
