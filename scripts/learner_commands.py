"""Record the commands notebooks send as a learner: ``make learner-commands`` (NB=... to choose).

Starts a throwaway redis-server set up as docs/workshop.md says (the instructor loads the suite's
code, one learner user), resets its command statistics, runs each notebook under nbval as that
learner, one after another, and reads ``INFO commandstats``: every command and subcommand the
server ran for the learner, the ones a script's ``redis.call`` ran included (they are checked
against the same ACL). It writes them, one a line, to ``helpers/tools/learner_commands.txt``,
from which ``helpers.tools.acl`` builds a learner's allow-list. ``--check`` compares instead of
writing, and exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workshop_sim import Learner, run_learners, start_server  # noqa: E402

from helpers.tools import acl  # noqa: E402

OWN = ("config|resetstat", "info")  # the recorder's own commands, once each
NOTEBOOKS = ["00_start_here", "01_get_then_incr", "02_blind_del", "03_hgetall_hsetnx"]


def commands_run(admin: redis.Redis) -> set[str]:
    """Return the commands (``name`` or ``name|sub``) the server ran for the learner since RESETSTAT.

    A command the ACL refused (a capability probe, EVAL of the learner's own text) was not run:
    it is printed, not recorded. The recorder's own CONFIG RESETSTAT and INFO are left out.
    """
    stats = admin.info("commandstats")
    ran = set()
    for name, fields in stats.items():
        command = name.removeprefix("cmdstat_").lower()
        calls, refused = int(fields.get("calls", 0)), int(fields.get("rejected_calls", 0))
        if command in OWN:
            calls -= 1
        if calls > 0:
            ran.add(command)
        elif refused:
            print(f"learner-commands: refused by the ACL, not recorded: {command} ({refused}x)")
    return ran


def recording_learner(admin: redis.Redis, url: str) -> Learner:
    """Create one learner whose commands are the categories the list replaced; return it."""
    name, password = "recorder", acl.new_password()
    acl.apply_learners([admin], {name: password}, recording=True)
    return Learner(name, acl.user_url(url, password, user=name))


def record(notebooks: list[str]) -> set[str]:
    """Run notebooks as one learner on a throwaway server; return the commands the server ran."""
    server, admin, _settings = start_server(1)
    try:
        acl.load([admin])
        learners = [recording_learner(admin, server.url)]
        admin.config_resetstat()
        with tempfile.TemporaryDirectory(prefix="racelab-record-") as tmp:
            for notebook in notebooks:
                run_learners(learners, [notebook], Path(tmp))
                if learners[0].returncode != 0:
                    log = learners[0].log.read_text() if learners[0].log else ""
                    raise SystemExit(f"{notebook} failed as a learner:\n{log[-3000:]}")
                print(f"learner-commands: {notebook}: {learners[0].summary}", flush=True)
        return commands_run(admin)
    finally:
        admin.close()
        server.stop()


def main() -> int:
    """Record, then write (or --check) the committed list; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="*", default=NOTEBOOKS)
    parser.add_argument("--check", action="store_true", help="compare with the file, write nothing")
    args = parser.parse_args()
    recorded = record(args.notebooks)
    if args.check:
        committed = acl.learner_commands()
        missing, unused = sorted(recorded - committed), sorted(committed - recorded)
        for name in missing:
            print(f"learner-commands: sent but not in the list: {name}")
        for name in unused:
            print(f"learner-commands: in the list but not sent: {name}")
        return 1 if missing or unused else 0
    acl.COMMANDS_FILE.write_text(acl.commands_file_text(recorded))
    print(f"learner-commands: {len(recorded)} commands written to {acl.COMMANDS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
