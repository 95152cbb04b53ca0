"""trace-deps fact sites: the topology / mode facts inside expressions, for the refactor codemod."""

from __future__ import annotations

import textwrap

import pytest

from tttv2_tools.trace_dependencies import analyze, decide_fact

SOURCE = """
import ttnn


class Block:
    def __init__(self, mesh_device, args, galaxy=False):
        self.args = args
        self.num_devices = mesh_device.get_num_devices()
        self.TG = self.num_devices == 32
        self.wide = galaxy

    def forward(self, x, mode):
        sharded = mode == "decode"
        if not self.TG and mode != "decode":
            x = ttnn.relu(x)
        if 1 in list(self.args.mesh_device.shape) or self.wide:
            x = ttnn.exp(x)
        return ttnn.add(x, x, memory_config=self.args.get_cfg(mode), sharded=sharded)
"""


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    path = tmp_path_factory.mktemp("facts") / "block.py"
    path.write_text(textwrap.dedent(SOURCE))
    return analyze(path)


def _by_text(analysis, source):
    lines = textwrap.dedent(SOURCE).splitlines()
    out = {}
    for site in analysis.fact_sites:
        span = site.span
        assert span.start_line == span.end_line
        out[lines[span.start_line - 1][span.start_col : span.end_col]] = site
    return out


def test_sites_cover_operands_and_values(analysis):
    sites = _by_text(analysis, SOURCE)
    assert sites['mode == "decode"'].fact == "mode:decode"
    assert sites['mode != "decode"'].polarity == -1
    assert sites["self.TG"].fact == "galaxy" and sites["self.TG"].polarity == 1
    assert sites["self.wide"].fact == "galaxy"  # a constructor argument named like the galaxy flag
    assert sites["mode"].fact == "mode" and sites["mode"].mode_form == "str"
    assert sites["self.num_devices == 32"].phase == "construction"
    assert all(s.function.startswith("Block.") for s in analysis.fact_sites)


def test_decide_fact(analysis):
    sites = _by_text(analysis, SOURCE)
    tg, not_decode = sites["self.TG"], sites['mode != "decode"']
    assert decide_fact(tg, topology="2d", mode="decode") is True
    assert decide_fact(tg, topology="1d", mode="decode") is False
    assert decide_fact(not_decode, topology="1d", mode="prefill") is True
    assert decide_fact(not_decode, topology="1d", mode="decode") is False
    with pytest.raises(ValueError, match="topology must be"):
        decide_fact(tg, topology="galaxy", mode="decode")
    with pytest.raises(ValueError, match="the mode itself"):
        decide_fact(sites["mode"], topology="1d", mode="decode")


def test_sites_survive_json(analysis):
    from tttv2_tools.trace_dependencies import Analysis

    loaded = Analysis.from_json(analysis.to_json())
    assert loaded.fact_sites == analysis.fact_sites and loaded == analysis


def test_tttv1_mlp_sites():
    a = analyze("tttv1/tt/mlp.py", "tttv1/tt/model_config.py")
    forward = [s for s in a.fact_sites if s.function == "MLP.forward"]
    assert {s.fact for s in forward} == {"galaxy", "mode", "mode:decode", "mode:prefill"}
    assert all(s.mode_form == "enum" for s in forward)  # mlp.py normalises with Mode(mode)
    helper = {(s.function, s.fact) for s in a.fact_sites if s.file == "ccl.py"}
    assert ("tt_all_reduce", "mesh_1d") in helper
    assert ("_nothing_to_exchange", "single_device") in helper


VALUE_CHAINS = """
import ttnn


class Block:
    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    def forward(self, x, mode):
        mem = self.args.is_galaxy and self.model_config["TG_MEMCFG"] or ttnn.DRAM_MEMORY_CONFIG
        wide = self.args.is_galaxy and x.shape[-1] > 32
        flat = not self.args.is_galaxy
        if wide or flat:
            x = ttnn.mul(x, 2.0)
        return ttnn.to_memory_config(x, mem)
"""


def test_an_and_or_chain_is_not_its_fact(tmp_path):
    """Only a place whose value *is* the fact is a site: a local an and/or chain yields is not (F1: the codemod
    replaced ``mem`` by True/False); an alias of a negated fact is, with polarity -1."""
    path = tmp_path / "block.py"
    path.write_text(textwrap.dedent(VALUE_CHAINS))
    a = analyze(path)
    lines = textwrap.dedent(VALUE_CHAINS).splitlines()
    sites = [
        (lines[s.span.start_line - 1][s.span.start_col : s.span.end_col], s.span.start_line)
        for s in a.fact_sites
    ]
    texts = {text for text, _ in sites}
    assert "mem" not in texts and "wide" not in texts
    # the operands the chains test are sites
    assert {("self.args.is_galaxy", 11), ("self.args.is_galaxy", 12)} <= set(sites)
    flat = next(s for s in a.fact_sites if s.span.start_line == 14 and s.span.start_col == 19)
    assert (flat.fact, flat.polarity) == ("galaxy", -1)
    # the test still reads the fact: decided on 1D (flat), open on galaxy (wide depends on the input)
    assert a.decide("block.py:14", "1d", "decode") is True
    assert a.decide("block.py:14", "2d", "decode") is None


# Each forward() compares its mode with a Mode member spelled another way (the text check that skips the walk of
# functions spelling no ``.DECODE`` / ``.PREFILL`` must still see it), or names DECODE only inside strings.
MODE_SPELLINGS = {
    "split_over_lines": "if mode == (Mode.  # the decode member\n            DECODE):\n            x = ttnn.relu(x)",
    "continuation": "if mode == Mode. \\\n                DECODE:\n            x = ttnn.relu(x)",
    "nfkc_identifier": "if mode == Mode.\uff30\uff32\uff25\uff26\uff29\uff2c\uff2c:\n            x = ttnn.relu(x)",
    "string_only": 'if mode == "decode":\n            x = ttnn.relu(x, memory_config="DECODE.PREFILL")',
}


@pytest.mark.parametrize("case", sorted(MODE_SPELLINGS))
def test_mode_form_sees_every_spelling_of_a_mode_member(tmp_path, case):
    source = (
        "import ttnn\nfrom common import Mode\n\n\nclass Block:\n    def forward(self, x, mode):\n        "
        + MODE_SPELLINGS[case]
        + "\n        return x\n"
    )
    path = tmp_path / "block.py"
    path.write_text(source, encoding="utf-8")
    forms = {s.mode_form for s in analyze(path).fact_sites}
    assert forms == ({"str"} if case == "string_only" else {"enum"})
