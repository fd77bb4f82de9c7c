"""The TRL adapter: its tools are the env's, it pickles without its env, its reward is the submit's,
and GRPOTrainer(environment_factory=...) trains two steps through it on the CPU.

The training test builds everything locally (no download): a byte-level BPE tokenizer trained on
the task prompt, given a chat template TRL ships, and a one-layer Qwen2 whose weights are set so
that it always answers one list_files tool call, then end of turn. A programmed model rather than
a random one, so the test can assert that the call reached the env without depending on a draw.
Needs the ``trl`` extra (skipped without it).
"""

import inspect
import pickle
from functools import partial
from pathlib import Path

import pytest

from conftest import HAS_GPU
from d2k_env.integrations.common import condition_rows
from d2k_env.integrations.trl import KernelToolEnv, ToolError, build_dataset
from d2k_env.tools import TOOLS

ROOT = Path(__file__).resolve().parent.parent
TASK = "fused_add_rmsnorm"
REFERENCE = (ROOT / "references" / f"{TASK}.py").read_text()
CALL = '<tool_call>\n{"name": "list_files", "arguments": {}}\n</tool_call>'
BAD_CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "../outside.py"}}\n</tool_call>'


def public_methods(cls) -> set[str]:
    """What TRL exposes as tools: the class's public functions but reset and get_reward."""
    return {n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not n.startswith("_") and n not in ("reset", "get_reward")}


def test_the_tools_are_the_envs_tools_with_schemas():
    transformers = pytest.importorskip("transformers")
    assert public_methods(KernelToolEnv) == set(TOOLS)
    for name in TOOLS:
        schema = transformers.utils.get_json_schema(getattr(KernelToolEnv, name))["function"]
        assert schema["name"] == name
        assert set(schema["parameters"].get("properties", {})) == set(TOOLS[name].properties)


def test_rows_cover_tasks_guidance_and_seeds():
    pytest.importorskip("datasets")
    dataset = build_dataset(tasks=[TASK], guidance=["none", "L1+L2"], seeds=[3, 4])
    assert [(r["guidance"], r["seed"]) for r in dataset] == [("none", 3), ("none", 4), ("L1+L2", 3), ("L1+L2", 4)]
    assert dataset[0]["prompt"][-1] == {"role": "user", "content": ""}
    with pytest.raises(ValueError):
        condition_rows(tasks=["no_such_task"])
    with pytest.raises(ValueError):
        condition_rows(guidance=["L7"])


def test_an_episode_through_the_tools_pickled_on_the_way():
    # The factory travels to the async trainer's rollout workers, and so may an adapter.
    factory = pickle.loads(pickle.dumps(partial(KernelToolEnv, backend="interpreter")))
    adapter = pickle.loads(pickle.dumps(factory()))
    with adapter:
        prompt = adapter.reset(task=TASK, guidance="none", seed=0, prompt=[{"role": "user", "content": ""}])
        assert TASK in prompt and "L1" not in adapter._env.env.state().guidance
        assert "solution.py" in adapter.list_files()
        adapter.write_file("solution.py", REFERENCE)
        # A live env does not travel: the copy starts with none and keeps the arguments.
        copy = pickle.loads(pickle.dumps(adapter))
        assert copy._env.env is None and copy._env.env_kwargs == {"backend": "interpreter"}
        assert adapter.get_reward() == 0.0
        assert "Reward: 1.0000" in adapter.submit()
        assert adapter.get_reward() == 1.0
        adapter.reset(task=TASK, seed=1)
        assert adapter.get_reward() == 0.0


def test_a_refused_call_and_a_call_after_the_episode_raise_the_error_trl_counts():
    with KernelToolEnv(backend="interpreter") as adapter:
        adapter.reset(task=TASK, guidance="none", seed=0)
        with pytest.raises(ToolError, match="outside the workspace"):
            adapter.read_file("../outside.py")
        with pytest.raises(ToolError, match="unknown workload"):
            adapter.benchmark(workloads=["no-such-workload"])
        assert "Submitted. Reward: 0.0000" in adapter.submit()  # the stub: refused by the policy, scored 0
        for call in (adapter.list_files, adapter.submit):
            with pytest.raises(ToolError, match=r"^episode ended \(the solution was submitted\)"):
                call()
        assert adapter._env.env.state().steps == 3  # the calls after the end did nothing
        assert adapter.get_reward() == 0.0


def tiny_tokenizer(corpus: str, call: str = CALL):
    """A byte-level BPE tokenizer trained on ``corpus``, with the Qwen3 chat template TRL ships and
    the scripted tool call as one token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    raw.train_from_iterator([corpus], trainers.BpeTrainer(vocab_size=1500, special_tokens=specials,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        padding_side="left")
    tokenizer.add_tokens([call])
    tokenizer.chat_template = qwen3_chat_template
    return tokenizer


def scripted_model(tokenizer, call: str = CALL):
    """A one-layer Qwen2 that answers CALL after any token and end of turn after CALL: its layer adds
    nothing (output projections zero), so the last position's hidden state is its token's embedding,
    and the head maps the two embeddings to the two answers with logit 40 (every other token 0)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                         tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    model = Qwen2ForCausalLM(config)
    call, end = tokenizer.convert_tokens_to_ids([call, "<|im_end|>"])
    with torch.no_grad():
        layer = model.model.layers[0]
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, 0] = 1.0
        model.model.embed_tokens.weight[call] = 0.0
        model.model.embed_tokens.weight[call, 1] = 1.0
        model.lm_head.weight.zero_()
        model.lm_head.weight[call, 0] = 10.0  # RMSNorm scales a unit vector by sqrt(16): logit 40
        model.lm_head.weight[end, 1] = 10.0
    return model


@pytest.mark.parametrize("call, failures", [(CALL, 0.0), (BAD_CALL, 1.0)], ids=["list_files", "refused-read_file"])
def test_grpo_trains_two_steps_through_the_adapter(tmp_path, monkeypatch, call, failures):
    pytest.importorskip("trl")
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    dataset = build_dataset(tasks=[TASK], guidance=["none"], seeds=[0])
    with KernelToolEnv(backend="interpreter") as probe:
        corpus = probe.reset(task=TASK, guidance="none", seed=0)
    tokenizer = tiny_tokenizer(corpus + dataset[0]["prompt"][0]["content"], call)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_steps=2,
                      max_completion_length=128, max_tool_calling_iterations=1, learning_rate=1e-3,
                      use_cpu=True, report_to="none", save_strategy="no", logging_steps=1, seed=0)
    trainer = GRPOTrainer(model=scripted_model(tokenizer, call), args=args, train_dataset=dataset,
                          processing_class=tokenizer,
                          environment_factory=partial(KernelToolEnv, backend="interpreter"))
    trainer.train()

    assert trainer.state.global_step == 2
    assert len(trainer.environments) == 2  # one per rollout of the last step
    for adapter in trainer.environments:
        state = adapter._env.env.state()
        assert state.task_id == TASK and state.guidance == () and state.seed == 0
        assert state.steps == 1 and (call != CALL or [a["tool"] for a in state.actions] == ["list_files"])
    # TRL counts a call whose tool raised: the refused read_file, in every rollout of both steps.
    frequencies = [row["tools/failure_frequency"] for row in trainer.state.log_history
                   if "tools/failure_frequency" in row]
    assert frequencies == [failures, failures]
    rewards = [row["rewards/KernelToolEnv/mean"] for row in trainer.state.log_history if "rewards/KernelToolEnv/mean" in row]
    assert rewards == [0.0, 0.0]  # no rollout submitted


def test_the_example_script_trains_two_steps_on_the_cpu(tmp_path):
    """examples/trl_grpo.py as a user runs it, with the programmed model saved as a local checkpoint
    (without --cpu: on a machine without a GPU the example finds the CPU itself)."""
    pytest.importorskip("trl")
    import subprocess
    import sys

    dataset = build_dataset(tasks=[TASK], guidance=["none"], seeds=[0])
    with KernelToolEnv(backend="interpreter") as probe:
        corpus = probe.reset(task=TASK, guidance="none", seed=0)
    tokenizer = tiny_tokenizer(corpus + dataset[0]["prompt"][0]["content"])
    scripted_model(tokenizer).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--model", str(tmp_path / "model"),
                           "--tasks", TASK, "--guidance", "none", "--backend", "interpreter",
                           "--max-steps", "2", "--num-generations", "2", "--max-env-steps", "1",
                           "--max-completion-length", "128", "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    printed = done.stdout + done.stderr
    assert printed.count("{'loss': ") == 2 and "'train_runtime'" in printed  # a log line per step, then the end
    assert (out / "config.json").exists() and (out / "model.safetensors").exists()  # the trained model saved
    assert HAS_GPU or "No CUDA GPU: training on the CPU" in done.stdout
