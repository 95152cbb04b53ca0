"""trace-deps on the hand-written TTTv1-style fixtures: every pattern of tttv1_patterns.md §1-§4."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from tttv2_tools.trace_dependencies import MODE, RUNTIME, STATIC, WEIGHTS, analyze

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def g2_mlp():
    return analyze(FIX / "g2" / "mlp.py", FIX / "g2" / "model_config.py")


@pytest.fixture(scope="module")
def g2_attn():
    return analyze(FIX / "g2" / "attention.py")  # config found next to the module


@pytest.fixture(scope="module")
def g3_mlp():
    return analyze(FIX / "g3" / "mlp.py", FIX / "g3" / "model_config.py")


def reads(a, kind="key"):
    return {(r.name, int(r.loc.split(":")[1])) for r in a.reads if r.kind == kind}


# ------------------------------------------------------------------------------------------- config reads
def test_every_way_of_reading_config_is_found(g2_mlp):
    a = g2_mlp
    assert a.keys_read() == [
        "DECODE_MLP_W1_W3_PRG_CONFIG",
        "DECODE_RESIDUAL_MEMCFG",
        "FF1_3_TG_PROGCFG",
        "MLP_ACT_MEMCFG",
        "PREFILL_MLP_W1_W3_PRG_CONFIG",
        "QKV_OUT_GATHERED_MEMCFG",
        "SHARDED_ATTN_INPUT_MEMCFG",
    ]
    by_name = {r.name: r for r in a.reads if r.kind == "key"}
    assert by_name["DECODE_RESIDUAL_MEMCFG"].default == "ttnn.DRAM_MEMORY_CONFIG"  # alias + .get(default)
    assert by_name["MLP_ACT_MEMCFG"].via == 'args.get_model_config()["MLP_ACT_MEMCFG"]'
    assert by_name["PREFILL_MLP_W1_W3_PRG_CONFIG"].called_with == ["seq_len"]  # lambda called with seq_len
    assert by_name["QKV_OUT_GATHERED_MEMCFG"].called_with == ["list(self.mesh_device.shape)[1]"]
    assert ("SHARDED_ATTN_INPUT_MEMCFG", 64) in reads(a)  # key split over three lines
    assert ("FF1_3_TG_PROGCFG", 52) in reads(a)  # through the local alias mc = self.model_config
    assert all(r.resolved for r in a.reads if r.kind == "key")
    methods = {r.name: r for r in a.reads if r.kind == "method"}
    assert methods["is_distributed_norm"].note == "callable passed as a value"
    assert methods["ccl_topology"].called_with == []
    attrs = {r.name for r in a.reads if r.kind == "attr"}
    assert {"dim", "num_devices", "is_galaxy", "prefill_len_cutoff", "ccl_dtype", "dummy_weights"} <= attrs
    missing = {r.name for r in a.reads if not r.resolved}
    assert missing == {"mlp_activation_type", "fuse_mlp"}  # getattr/hasattr of members ModelArgs lacks
    assert (
        a.graph.nodes["unknown:attr:fuse_mlp"]["reason"]
        == "ModelArgs (model_config.py) defines no attribute 'fuse_mlp'"
    )


def test_configuration_alias_and_get_model_config(g2_attn):
    a = g2_attn
    assert a.config == "model_config.py"
    assert a.keys_read() == [
        "ATTN_ALL_GATHER_MATMUL_PROGCFG",
        "QKV_OUT_GATHERED_MEMCFG",
        "SCORES_BATCHED_MM_OUTPUT_MEMCFG",
        "SDPA_PROGCFG",
        "USE_FUSED_ALL_GATHER_MATMUL",
    ]
    sdpa = [r for r in a.reads if r.name == "SDPA_PROGCFG"]
    assert sorted(tuple(r.called_with) for r in sdpa) == [("seq_len",), ("seq_len", "chunk_start_idx")]


# ------------------------------------------------------------------------------------------- definitions
def test_generated_keys_and_last_assignment_wins(g2_mlp):
    defs = g2_mlp.definitions["DECODE_RESIDUAL_MEMCFG"]
    assert [d.value_kind for d in defs] == ["comprehension", "value"]
    generated, literal = defs
    assert generated.value.startswith("L1_MEMCFG")  # the comprehension's IfExp resolved for this key
    assert generated.live and generated.live_when == "not (device is not None)"
    assert [g.describe() for g in literal.guards] == ["device is not None"]
    assert literal.live and not literal.shadowed_by


def test_both_galaxy_definitions_kept(g2_mlp):
    defs = g2_mlp.definitions["QKV_OUT_GATHERED_MEMCFG"]
    assert [(d.params, [g.describe() for g in d.guards]) for d in defs] == [
        (["mesh_cols"], ["device is not None", "self.is_galaxy"]),
        (["mesh_rows"], ["device is not None", "not (self.is_galaxy)"]),
    ]
    assert defs[0].facts == ["galaxy"] and defs[1].facts == ["not galaxy"]
    assert all(d.live for d in defs) and defs[0].function == "ModelArgs.set_tg_attention_config"
    (tg_only,) = g2_mlp.definitions["FF1_3_TG_PROGCFG"]
    assert [g.describe() for g in tg_only.guards] == ["device is not None", "self.is_galaxy"]


def test_lambda_closures_keys_reading_keys_env_and_hardware(g2_mlp):
    g = g2_mlp.graph
    prefill = nx.ancestors(g, "key:PREFILL_MLP_W1_W3_PRG_CONFIG")
    # the lambda closes over local lambdas and locals of __init__, followed transitively
    assert (
        "func:model_config.py:ModelArgs.__init__.<lambda@94:26>" in prefill
    )  # mlp1_3_grid = lambda seq_len: …
    assert "local:model_config.py:ModelArgs.__init__:prefill_rows" in prefill
    assert "local:model_config.py:ModelArgs.__init__:dram_shard_grid_width" in prefill
    assert {"hw:arch", "hw:dram_grid", "hf:dim", "hf:intermediate_size", "method:matmul_config"} <= prefill
    assert "key:FULL_GRID_MEMCFG" in nx.ancestors(g, "key:MLP_ACT_MEMCFG")
    assert "env:PAD_MLP_CORES" in nx.ancestors(g, "attr:hidden_dim")
    assert {"env:HF_MODEL", "env:MAX_PREFILL_CHUNK_SIZE"} <= set(g2_mlp.roots["env"]) | {
        "env:MAX_PREFILL_CHUNK_SIZE"
    }
    cutoff = g2_mlp.attr_definitions["prefill_len_cutoff"]
    assert [d.value for d in cutoff] == ["512 if is_blackhole() else 1024", "512"]
    assert "model-name" in cutoff[1].facts or cutoff[1].guards[-1].text.startswith("self.base_model_name")


def test_attention_definitions_env_and_key_guarded_by_key(g2_attn):
    a = g2_attn
    use_fused = a.definitions["USE_FUSED_ALL_GATHER_MATMUL"]
    assert "env:ACTUAL_DEVICE" in nx.ancestors(a.graph, use_fused[0].id)
    agmm = a.definitions["ATTN_ALL_GATHER_MATMUL_PROGCFG"]
    assert [[g.describe() for g in d.guards][-1] for d in agmm] == [
        'self.model_config["USE_FUSED_ALL_GATHER_MATMUL"]',
        'not (self.model_config["USE_FUSED_ALL_GATHER_MATMUL"])',
    ]
    sdpa = a.graph.nodes["param:model_config.py:ModelArgs.__init__.<lambda@155:48>:seqlen"]
    assert sdpa["category"] == "input"  # lambda parameters are per-call inputs


def test_moe_dynamic_and_function_valued_keys():
    a = analyze(FIX / "g2" / "mlp.py", FIX / "g2" / "model_config.py")
    from tttv2_tools.trace_dependencies.engine import Engine  # noqa: F401 - the definitions live in the engine

    # MoE keys only exist after load_state_dict() ran and found experts
    moe_sites = a.definitions.get("FF1_OUTPUT_PROGCFG")
    assert moe_sites is None  # not read by the MLP, so not in the graph ...
    engine_defs = _engine_defs(FIX / "g2" / "mlp.py")
    (moe,) = engine_defs.out.key_defs["FF1_OUTPUT_PROGCFG"]
    assert moe.guards[0] == ("call:ModelArgs.load_state_dict", "called")
    (xattn,) = engine_defs.out.key_defs["XATTN_KV_PREFILL_MEM_CFG"]
    assert xattn.value.id == "_get_xattn_kv_prefill_mem_cfg"
    assert [d.dynamic for d in engine_defs.out.dynamic_defs] == ['model_config[f"{name}_EXTRA"]']
    assert len(engine_defs.out.key_defs["DECODERS_OPTIMIZATIONS"]) == 2
    assert sorted(k for k in engine_defs.out.key_defs if k.endswith("_TILE")) == [
        "ATTN_W_LAYOUT_TILE",
        "MLP_W_LAYOUT_TILE",
    ]
    assert "DEFAULTED_KEY" in engine_defs.out.key_defs


def _engine_defs(module):
    from tttv2_tools.trace_dependencies.engine import Engine
    from tttv2_tools.trace_dependencies.source import Project

    project = Project(module.parent)
    engine = Engine(project, project.load(module), project.load(module.parent / "model_config.py"))
    engine.compose()
    return engine


def test_unknown_key_explains_dynamic_definitions(tmp_path):
    module = tmp_path / "mod.py"
    module.write_text(
        "class M:\n    def __init__(self, args):\n        self.mc = args.get_model_config()\n"
        "    def forward(self, x, mode):\n        return self.mc['A_EXTRA'], self.mc['NOPE']\n"
    )
    (tmp_path / "model_config.py").write_text((FIX / "g2" / "model_config.py").read_text())
    a = analyze(module)
    reason = a.graph.nodes["unknown:key:NOPE"]["reason"]
    assert reason.startswith(
        "no definition of model_config['NOPE'] in model_config.py; it may come from a dynamic key"
    )
    assert a.definitions["NOPE"] == []


# ------------------------------------------------------------------------------------------- branches
def classes(a, side="module"):
    return {b.id.split(":", 1)[1]: b.classification for b in a.branches if b.side == side}


def test_branch_classification_of_every_module_branch(g2_mlp):
    assert classes(g2_mlp) == {
        "28:11": STATIC,  # hasattr on a member ModelArgs lacks: constant False
        "30:11": STATIC,
        "30:11:boolop": STATIC,  # args.dummy_weights or weight_cache_path is None
        "37:53": STATIC,
        "43:11": WEIGHTS,
        "50:11": MODE,
        "51:15": STATIC,
        "52:49": STATIC,
        "56:15": RUNTIME,
        "63:36": STATIC,
        "63:44:boolop": STATIC,
        "68:11": WEIGHTS,
        "71:11": MODE,
        "71:11:boolop": STATIC,  # the short-circuit is decided by self.TG alone
        "78:22": STATIC,
        "78:22:boolop": STATIC,
        "80:92": STATIC,
        "83:11": MODE,
    }
    b = g2_mlp.branch_at("mlp.py", 71, 11)
    assert b.factors == [STATIC, MODE] and b.topology == ["galaxy"] and b.mode == ["not decode"]


def test_proof_chain_has_file_and_line_per_hop(g2_mlp):
    b = g2_mlp.branch_at("mlp.py", 51)
    chain = b.chain[STATIC]
    assert [h.node for h in chain] == [
        "hw:num_devices",
        "attr:num_devices",
        "attr:is_galaxy",
        "local:mlp.py:MLP.forward:TG",
        "branch:mlp.py:51:15",
    ]
    assert [h.loc for h in chain[1:]] == [
        "model_config.py:29:8",
        "model_config.py:33:8",
        "mlp.py:48:8",
        "mlp.py:51:15",
    ]
    runtime = g2_mlp.branch_at("mlp.py", 56).chain[RUNTIME]
    assert runtime[0].node == "input:x" and runtime[-2].node == "local:mlp.py:MLP.forward:seq_len"


def test_five_galaxy_spellings_are_one_fact(g2_mlp, g2_attn):
    topo = lambda a, file, line: a.branch_at(file, line).topology  # noqa: E731
    assert topo(g2_mlp, "mlp.py", 37) == ["galaxy"]  # args.is_galaxy
    assert topo(g2_mlp, "mlp.py", 51) == ["galaxy"]  # local TG = self.args.is_galaxy
    assert topo(g2_mlp, "mlp.py", 71) == ["galaxy"]  # self.TG = args.num_devices == 32
    assert topo(g2_attn, "attention.py", 64) == [
        "galaxy"
    ]  # self.TG = self.num_devices (= configuration.num_devices) == 32
    norm = analyze(FIX / "g2" / "norm.py", FIX / "g2" / "model_config.py")
    assert norm.branch_at("norm.py", 14).topology == ["galaxy"]  # constructor argument TG=
    assert "mesh_1d" in g2_mlp.branch_at("ccl.py", 13).topology  # ccl.py's runtime mesh-shape test
    assert g2_mlp.branch_at("ccl.py", 13).side == "helper"
    assert all(
        f"branch:{b.id}" in g2_mlp.graph.successors("fact:galaxy")
        for b in g2_mlp.branches
        if b.topology == ["galaxy"]
    )


def test_mode_as_string_and_enum(g2_mlp, g3_mlp):
    assert g2_mlp.branch_at("mlp.py", 50).mode == ["decode"]
    assert g3_mlp.branch_at("mlp.py", 35).mode == ["prefill"]
    assert g3_mlp.branch_at("mlp.py", 46).mode == ["not decode"]
    assert g3_mlp.branch_at("mlp.py", 46).classification == RUNTIME


def test_every_construct_is_a_branch():
    a = analyze(FIX / "bad" / "weird.py", auto_config=False)
    constructs = sorted({b.construct for b in a.branches})
    assert constructs == ["assert", "comprehension-if", "if", "ifexp", "match", "while"]
    g2 = analyze(FIX / "g2" / "mlp.py")
    assert {"boolop", "elif"} <= {b.construct for b in g2.branches}


# ------------------------------------------------------------------------------------------- G3 methods
def test_g3_methods_resolved_and_their_branches_classified(g3_mlp):
    a = g3_mlp
    methods = {r.name for r in a.reads if r.kind == "method"}
    assert methods == {
        "get_mlp_ff1_3_prg_config",
        "get_mlp_ff2_prg_config",
        "get_mlp_ff1_3_mem_config",
        "get_mlp_ff2_all_reduce_mem_config",
    }
    assert all(r.resolved for r in a.reads)
    assert a.keys_read() == ["FF1_OUT_REDUCE_SCATTER_MEMCFG", "MLP_RS_CONFIG"]
    helper = {b.id: (b.classification, b.function) for b in a.branches if b.side == "helper"}
    assert helper["model_config.py:38:11"] == (MODE, "ModelArgs.get_mlp_ff1_3_prg_config")
    assert helper["model_config.py:39:15"] == (STATIC, "ModelArgs.get_mlp_ff1_3_prg_config")
    assert helper["model_config.py:46:11"][0] == RUNTIME
    # the method value depends on its closure only; the call site adds mode / seq_len to the call result
    assert "input:mode" not in nx.ancestors(a.graph, "method:get_mlp_ff1_3_prg_config")
    assert a.branch_at("model_config.py", 38).chain[MODE][0].node == "input:mode"  # bound from forward(mode)
    assert "env:FIXTURE_HIDDEN_DIM" in a.roots["env"]


# ------------------------------------------------------------------------------------------- roots, levels, ops
def test_roots_and_levels(g2_mlp):
    roots = g2_mlp.roots
    assert roots["mode"] == ["input:mode"]
    assert roots["input"] == ["input:x"]
    assert roots["weights"] == ["weights:state_dict"]
    assert {"hw:num_devices", "hw:mesh_shape", "hw:arch", "hw:device_present"} <= set(roots["hardware"])
    assert {"arg:max_batch_size", "arg:dummy_weights"} <= set(roots["model_arg"])
    assert {"module:layer_num", "module:weight_cache_path", "module:dtype"} <= set(roots["module_arg"])
    levels = g2_mlp.levels
    assert "key:MLP_ACT_MEMCFG" in levels["config_keys"] and "hw:num_devices" in levels["hardware"]
    assert "op:ttnn.linear" in levels["terminal_ops"] and "input:mode" in levels["per_call_inputs"]
    assert all(g2_mlp.graph.nodes[n]["depth"] == 0 for ns in roots.values() for n in ns)


def test_terminal_ops_per_path(g2_mlp):
    paths = g2_mlp.paths
    # ttnn.linear through a module-level alias, ex.* through a from-import, x.deallocate(), tensor "+"
    for ops in paths.values():
        assert {"ttnn.linear", "ttnn.Tensor.deallocate", "ttnn.add"} <= set(ops)
    assert "ttnn.experimental.all_gather_async" in paths["prefill/galaxy"]  # self.TG and mode != decode
    assert "ttnn.experimental.all_gather_async" not in paths["decode/non-galaxy"]
    assert "ttnn.experimental.fast_reduce_nc" in paths["decode/galaxy"]  # ccl 2D path
    assert "ttnn.experimental.fast_reduce_nc" not in paths["decode/non-galaxy"]  # 1D path returns early
    assert "ttnn.reshape" not in paths["decode/non-galaxy"]
    assert (
        "ttnn.to_memory_config" in paths["decode/non-galaxy"]
        and "ttnn.to_memory_config" not in paths["prefill/galaxy"]
    )
    assert g2_mlp.construction_ops == ["ttnn.as_tensor"]
    add = [o for o in g2_mlp.ops if o.op == "ttnn.add"]
    assert add[0].spelled == "+ (tensor operator)"
    rs = [o for o in g2_mlp.ops if o.function == "tt_all_reduce"]
    assert rs and all(o.via == ["tt_all_reduce"] for o in rs)


def test_restricted_views(g2_mlp, g2_attn):
    decode_1d = g2_mlp.restrict(mode="decode", topology="1d")
    assert decode_1d.assumptions == {"mode": "decode", "topology": "1d"}
    assert list(decode_1d.paths) == ["decode/non-galaxy"]
    keys = decode_1d.keys_read()
    assert "PREFILL_MLP_W1_W3_PRG_CONFIG" not in keys and "FF1_3_TG_PROGCFG" not in keys
    assert "DECODE_MLP_W1_W3_PRG_CONFIG" in keys
    assert [d.params for d in decode_1d.definitions["QKV_OUT_GATHERED_MEMCFG"]] == [["mesh_rows"]]
    assert "decided:true" in decode_1d.branch_at("mlp.py", 50).facts
    assert "op:ttnn.experimental.fast_reduce_nc" not in decode_1d.graph
    assert decode_1d.graph.number_of_nodes() < g2_mlp.graph.number_of_nodes()
    prefill = g2_attn.restrict(mode="prefill")
    assert "SCORES_BATCHED_MM_OUTPUT_MEMCFG" not in prefill.keys_read()
    assert g2_mlp.restrict() is g2_mlp


def test_why_and_branch_at(g2_mlp):
    paths = g2_mlp.why("FF1_3_TG_PROGCFG")
    starts = {p[0].node for p in paths}
    assert {"hw:num_devices", "hf:dim"} <= starts
    assert all(p[-1].node == "key:FF1_3_TG_PROGCFG" for p in paths)
    assert g2_mlp.why("args.is_galaxy")[0][-1].node == "attr:is_galaxy"
    assert g2_mlp.why("mlp.py:51")[0][-1].node == "branch:mlp.py:51:15"
    assert g2_mlp.why("linear") and g2_mlp.why("no-such-thing") == []
    assert g2_mlp.branch_at("mlp.py", 51, 15).test == "TG"
    assert g2_mlp.branch_at("mlp.py", 51, 12).test == "TG"  # statement position works too
    assert g2_mlp.branch_at("mlp.py", 999) is None
    assert g2_mlp.branches_by_loc()["mlp.py:51:15"].construct == "if"
