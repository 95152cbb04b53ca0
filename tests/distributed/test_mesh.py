"""One logical mesh over tttv2-run's ranks (docs/distributed.md): every rank computes bit for bit what one process
computes, the tttv1 demo prints the same text on a Galaxy 8x4 over 4 ranks, and a dead rank or ranks that
disagree end every rank with a clear error, never a hang. Each test launches its ranks itself."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.distributed import mesh_program
from tests.distributed.test_run import HANG, ROOT, tttv2_run


def program(*args: str) -> list[str]:
    return ["--", sys.executable, "-m", "tests.distributed.mesh_program", *args]


def results(lines: list[str]) -> list[str]:
    """The result lines of mesh_program (not the line naming the rank's devices)."""
    return [line for line in lines if line and not line.startswith("rank ")]


def rank_lines(stdout: str, rank: int) -> list[str]:
    prefix = f"[{rank}] "
    return [line[len(prefix) :] for line in stdout.splitlines() if line.startswith(prefix)]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> list[str]:
    """mesh_program's lines when one process emulates the whole 8x4 mesh."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.distributed.mesh_program", "ops"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rank 0: devices 0..31 of 32\n")
    return results(done.stdout.splitlines())


def test_four_ranks_of_a_galaxy_compute_bit_for_bit_what_one_process_computes(one_process):
    done = tttv2_run("--np", "4", "--all-output", *program("ops"))
    assert done.returncode == 0, done.stderr
    assert len(one_process) == 27  # round trip, transfers, every collective, send_recv, the MLP
    for rank in range(4):
        lines = rank_lines(done.stdout, rank)
        assert lines[0] == f"rank {rank}: devices {8 * rank}..{8 * rank + 7} of 32"  # two mesh rows each
        assert results(lines) == one_process, f"rank {rank}"


def test_a_rank_binding_gives_ranks_uneven_shares_and_the_results_do_not_change(tmp_path, one_process):
    binding = tmp_path / "binding.yaml"
    binding.write_text(
        "rank_bindings:\n"
        f"  - {{rank: 0, mesh_devices: {list(range(8, 32))}}}\n"
        f"  - {{rank: 1, mesh_devices: {list(range(8))}}}\n"
    )
    done = tttv2_run("--np", "2", "--rank-binding", str(binding), "--all-output", *program("ops"))
    assert done.returncode == 0, done.stderr
    assert rank_lines(done.stdout, 0)[0] == "rank 0: devices 8..31 of 32"
    assert rank_lines(done.stdout, 1)[0] == "rank 1: devices 0..7 of 32"
    for rank in range(2):
        assert results(rank_lines(done.stdout, rank)) == one_process, f"rank {rank}"


def test_ranks_bound_to_two_mesh_ids_spread_two_meshes_each_like_one_process(tmp_path, capsys):
    assert mesh_program.main("ops", "2x2") == 0
    reference = results(capsys.readouterr().out.splitlines())
    binding = tmp_path / "binding.yaml"
    binding.write_text(
        "rank_bindings:\n" + "".join(f"  - {{rank: {r}, mesh_id: {r // 2}}}\n" for r in range(4))
    )
    done = tttv2_run("--np", "4", "--rank-binding", str(binding), "--all-output", *program("ops", "2x2"))
    assert done.returncode == 0, done.stderr
    for rank in range(4):  # ranks 0-1 share one 2x2 mesh, ranks 2-3 another
        lines = rank_lines(done.stdout, rank)
        first = 2 * (rank % 2)
        assert lines[0] == f"rank {rank}: devices {first}..{first + 1} of 4"
        assert results(lines) == reference, f"rank {rank}"


def test_the_tttv1_demo_on_a_galaxy_over_four_ranks_prints_the_single_process_text(capsys):
    from tttv1.demo.simple_text_demo import main as demo_main

    args = ["--mesh", "TG", "--max-new-tokens", "4"]
    assert demo_main(args) == 0  # one process, in this one
    single = capsys.readouterr().out
    done = tttv2_run("--np", "4", "--", sys.executable, "-m", "tttv1.demo.simple_text_demo", *args)
    assert done.returncode == 0, done.stderr

    def text(stdout: str) -> list[str]:  # all but the timings
        lines = [line for line in stdout.splitlines() if not line.startswith("prefill: ")]
        return [re.sub(r" in \d+\.\d+ s ", " in (time) ", line) for line in lines]

    assert "[user 0] output: " in single and "mesh=[8, 4]" in single
    assert text(done.stdout) == text(single)
    assert len(text(single)) == 4  # the model, where the weights come from, the prompt and the generated text


def test_a_galaxy_smoke_check_in_tt_metal_style_passes_on_every_rank():
    done = tttv2_run(
        "--np", "2", "--all-output", "--", sys.executable, "tests/distributed/fixtures/galaxy_ranks.py"
    )
    assert done.returncode == 0, done.stderr
    for rank in range(2):
        assert f"[{rank}] Rank {rank}/2: mesh has 32 devices\n" in done.stdout
        assert f"[{rank}] Rank {rank}: PASSED\n" in done.stdout


def test_a_rank_killed_mid_run_ends_the_others_with_its_signal():
    done = tttv2_run("--np", "2", *program("kill"))
    assert done.returncode == 128 + 9
    assert done.stderr.startswith("tttv2-run: rank 1 was killed by SIGKILL\n")
    assert "all_reduce axis 0" not in done.stdout  # rank 0 was stopped in the collective after the kill


def test_a_rank_that_leaves_mid_run_makes_the_next_collective_time_out():
    done = tttv2_run("--np", "2", "--timeout", "3", *program("leave"))
    assert done.returncode == 1
    assert (
        "tttv2-run: rank 0 failed: tttv2.distributed.DistributedTimeoutError: rank 0: ttnn.all_reduce "
        "(32 shards of [1, 1, 64, 256] float32) did not complete within 3 s"
    ) in done.stderr


def test_a_mesh_that_does_not_divide_over_the_ranks_names_both():
    done = tttv2_run("--np", "2", *program("ops", "3x1"))
    assert done.returncode == 1
    assert "tttv2-run: rank 1 failed: tttv2.distributed.DistributedError: rank 1: ttnn.open_mesh_device" in (
        done.stderr
    )
    assert (
        "DistributedError: rank 0: ttnn.open_mesh_device: the 3x1 mesh (3 devices) does not divide over the 2 "
        "ranks of tttv2-run --np 2"
    ) in done.stderr


def test_ranks_that_open_different_meshes_fail_on_every_rank_naming_both():
    done = tttv2_run("--np", "2", "--all-output", *program("other-mesh"))
    assert done.returncode == 1
    for rank, other in ((0, 1), (1, 0)):
        assert (
            f"tttv2-run: rank {rank} failed: tttv2.distributed.DistributedError: rank {rank}: ranks disagree"
            in (done.stderr)
        )
        assert f"[{rank}] tttv2.distributed.DistributedError: rank {rank}: ranks disagree" in done.stderr
        assert f", rank {other} runs ttnn.open_mesh_device(" in done.stderr
    assert "ttnn.open_mesh_device(MeshShape([8, 4]), WORMHOLE_B0) on 33 bytes" in done.stderr
    assert "ttnn.open_mesh_device(MeshShape([4, 8]), WORMHOLE_B0) on 33 bytes" in done.stderr


def test_ranks_that_run_different_collectives_fail_on_every_rank_naming_both():
    done = tttv2_run("--np", "2", "--all-output", *program("other-collective"))
    assert done.returncode == 1
    for rank in range(2):
        assert (
            f"tttv2-run: rank {rank} failed: tttv2.distributed.DistributedError: rank {rank}: ranks disagree"
            in (done.stderr)
        )
    assert "rank 1: ranks disagree: this rank runs ttnn.all_gather (32 shards" in done.stderr
    assert "rank 0: ranks disagree: this rank runs ttnn.all_reduce (32 shards" in done.stderr


def test_one_process_is_the_whole_mesh(capsys):
    assert mesh_program.main("ops", "2x2") == 0
    out = capsys.readouterr().out
    assert out.startswith("rank 0: devices 0..3 of 4\n") and len(results(out.splitlines())) == 27
