"""``collect-cases`` with a stand-in demo module in place of tttv1's text demo (a real catalogue run takes ~17 s):
``python -m tests.tools.collect_cases.sweep_ranks_program DEMO_MODULE sweep ...``, alone or under tttv2-run."""

import sys

from tttv2_tools.collect_cases import cli, sweep_ranks

if __name__ == "__main__":
    sweep_ranks.DEMO = sys.argv[1]
    sys.exit(cli.main(sys.argv[2:]))
