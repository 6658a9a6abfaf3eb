"""The layer atlas calculator shows the model's values, moves with its controls, warns when the weights
and the KV cache cannot fit the GPU, and turns impossible input into a message."""
import re

import pytest

from course_lib.core.hardware import spec
from course_lib.models import transformer
from course_lib.models.transformer import LLAMA3_8B
from course_lib.widgets.base import _fmt_seconds
from course_lib.widgets.transformer_layer import layer_atlas_calculator


def floor_shown(calc) -> str:
    return re.search(r'class="course-layer-floor">([^<]+)<', calc.answer.value).group(1)


def test_the_answer_is_the_models_layer_floor():
    calc = layer_atlas_calculator(gpu="NVIDIA H200", phase="decode", batch=1, length=4096)
    rows = transformer.atlas(LLAMA3_8B, transformer.decode(1, 4096), spec("NVIDIA H200"))
    assert floor_shown(calc) == _fmt_seconds(sum(r.seconds for r in rows))
    assert calc.answer.value.count("<tr data-op=") == len(rows) and "course-calc-error" not in calc.answer.value


def test_prefill_turns_the_projections_compute_bound_and_decode_is_all_memory():
    calc = layer_atlas_calculator(phase="decode", batch=1, length=4096)
    assert 'class="course-memory-share">100%<' in calc.answer.value
    calc.phase.value, calc.length.value = "prefill", 4096
    assert 'class="course-memory-share">100%<' not in calc.answer.value
    assert calc.answer.value.count('<td class="course-binding">compute</td>') >= 4   # the four GEMMs at least


def test_replicating_kv_grows_the_attention_bytes_by_the_group_size():
    calc = layer_atlas_calculator(phase="decode", batch=8, length=32768)
    grouped = floor_shown(calc)
    calc.replicated.value = True
    assert floor_shown(calc) != grouped and "replicated per query head" in calc.answer.value


def test_a_batch_whose_kv_cache_cannot_fit_is_warned_of_but_still_costed():
    calc = layer_atlas_calculator(gpu="NVIDIA H200", phase="decode", batch=64, length=32768)
    assert "course-calc-warning" in calc.answer.value and "more than the 141 GB" in calc.answer.value
    assert "course-layer-floor" in calc.answer.value
    calc.batch.value = 1
    assert "course-calc-warning" not in calc.answer.value


@pytest.mark.parametrize("field, value, says", [("batch", 0, "batch"), ("length", -5, "context"),
                                                ("length", 0, "tokens")])
def test_impossible_input_is_a_message(field, value, says):
    calc = layer_atlas_calculator(phase="prefill" if says == "tokens" else "decode")
    getattr(calc, field).value = value
    assert "course-calc-error" in calc.answer.value and says in calc.answer.value


def test_the_output_head_is_shown_once_per_model_outside_the_layers_floor():
    calc = layer_atlas_calculator(gpu="NVIDIA H200", phase="decode", batch=16, length=8192)
    head = transformer.output_head(LLAMA3_8B, transformer.decode(16, 8192))
    assert calc.answer.value.count("data-once-per-model=") == 1 and f"{head.bytes / 1e6:,.4g}" in calc.answer.value
    rows = transformer.atlas(LLAMA3_8B, transformer.decode(16, 8192), spec("NVIDIA H200"))
    model = re.search(r'class="course-model-floor">([^<]+)<', calc.answer.value).group(1)
    assert model == _fmt_seconds(32 * sum(r.seconds for r in rows) + head.bound(spec("NVIDIA H200")).seconds)
