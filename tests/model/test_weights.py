"""model.weights: a search records a hash of its model folder's weights, read without loading them, so an export
can tell the folder still holds them."""

import json
import shutil

import torch
from safetensors.torch import load_file, save_file

from promptsearch.model.weights import changed_weights, weights_sample


def test_a_folder_copied_elsewhere_keeps_its_sample_and_a_rounded_or_changed_tensor_does_not(
        tiny_bert_encoder_only_dir, tmp_path):
    sample = weights_sample(tiny_bert_encoder_only_dir)
    assert sample is not None and list(sample) == ["model.safetensors"]
    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert_encoder_only_dir, copy)
    (copy / "checkpoint-10").mkdir()  # a trainer's checkpoint beside the model is not the model
    save_file({"w": torch.ones(2, 2)}, copy / "checkpoint-10" / "model.safetensors")
    assert weights_sample(copy) == sample and changed_weights(sample, copy) is None
    tensors = load_file(copy / "model.safetensors")
    save_file({k: v.to(torch.bfloat16) for k, v in tensors.items()}, copy / "model.safetensors")  # stored rounded
    assert changed_weights(sample, copy) == "its model.safetensors differs"
    bias = next(k for k in sorted(tensors) if k.endswith("output.dense.bias"))  # one value of a 1-D tensor
    changed = dict(tensors, **{bias: tensors[bias].clone()})
    changed[bias][-1] += 1e-4
    save_file(changed, copy / "model.safetensors")
    assert changed_weights(sample, copy) == "its model.safetensors differs"
    save_file(tensors, copy / "model.safetensors")  # the same tensors written again
    assert changed_weights(sample, copy) is None
    (copy / "2_Dense").mkdir()  # a module's weights in the folder modules.json names are the model's
    save_file({"linear.weight": torch.ones(3, 3)}, copy / "2_Dense" / "model.safetensors")
    (copy / "st").mkdir()  # an export written inside the folder (a review's case: removed, then refused) is not
    save_file({"w": torch.ones(2, 2)}, copy / "st" / "model.safetensors")
    assert sorted(weights_sample(copy) or {}) == ["model.safetensors"]  # no modules.json: the root's alone
    (copy / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "t"},
                                                   {"idx": 2, "name": "2", "path": "2_Dense", "type": "d"}]))
    sample = weights_sample(copy)
    assert sorted(sample or {}) == ["2_Dense/model.safetensors", "model.safetensors"]
    shutil.rmtree(copy / "st")
    assert changed_weights(sample, copy) is None


def test_nothing_to_compare_is_no_refusal_and_a_weights_file_gone_is(tiny_bert_encoder_only_dir, tmp_path):
    sample = weights_sample(tiny_bert_encoder_only_dir)
    bin_only = tmp_path / "bin"
    bin_only.mkdir()
    torch.save(load_file(tiny_bert_encoder_only_dir / "model.safetensors"), bin_only / "pytorch_model.bin")
    assert weights_sample(bin_only) is None and weights_sample(tmp_path / "none") is None
    assert changed_weights(None, tiny_bert_encoder_only_dir) is None  # a file written before samples were recorded
    assert changed_weights(sample, tmp_path / "none") is None  # no folder: loading it says so
    assert changed_weights(sample, bin_only) == "it holds no model.safetensors"
