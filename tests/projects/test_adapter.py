"""The project commands' exact command lines (fixed fields; names checked before sacctmgr runs)."""

import pytest

from slurm.adapter import Slurm


class _Runner:
    def __init__(self, answer: str = "") -> None:
        self.answer, self.calls = answer, []

    def run(self, program: str, args: list[str]) -> str:
        self.calls.append([program, *args])
        return self.answer


def test_exact_command_lines():
    runner = _Runner("vision|\nvision|alice\nnlp|\n")
    slurm = Slurm(runner)
    assert slurm.account_members(accounts=["vision", "nlp"]) == {"vision": {"alice"}, "nlp": set()}
    slurm.account_add(account="vision", parent="projects", description="gpuportal project vision")
    slurm.account_users_add(account="vision", users=["alice", "bob"])
    slurm.account_users_remove(account="vision", users=["eve"])
    slurm.account_budget_set(account="vision", minutes=30000)
    slurm.account_budget_set(account="vision", minutes=None)
    runner.answer = ""
    slurm.gpu_budgets(accounts=["vision", "nlp"])
    assert runner.calls == [
        ["sacctmgr", "--noheader", "--parsable2", "list", "assoc", "account=vision,nlp",
         "format=Account,User"],
        ["sacctmgr", "--immediate", "add", "account", "vision", "Parent=projects",
         "Description=gpuportal project vision", "Organization=vision"],
        ["sacctmgr", "--immediate", "add", "user", "alice,bob", "account=vision"],
        ["sacctmgr", "--immediate", "delete", "user", "eve", "account=vision"],
        ["sacctmgr", "--immediate", "modify", "account", "vision", "set", "GrpTRESMins=gres/gpu=30000"],
        ["sacctmgr", "--immediate", "modify", "account", "vision", "set", "GrpTRESMins=gres/gpu=-1"],
        ["sshare", "--noheader", "--parsable2", "--accounts", "vision,nlp",
         "--format", "Account,User,GrpTRESMins,GrpTRESRaw"],
    ]


@pytest.mark.parametrize("account", ["", "Vision", "a,b", "x where name=portal", "-1"])
def test_bad_account_names_never_reach_sacctmgr(account):
    runner = _Runner()
    with pytest.raises(ValueError):
        Slurm(runner).account_budget_set(account=account, minutes=1)
    assert runner.calls == []


@pytest.mark.parametrize("user", ["", "Alice", "a,b", "root where x"])
def test_bad_user_names_never_reach_sacctmgr(user):
    runner = _Runner()
    with pytest.raises(ValueError):
        Slurm(runner).account_users_add(account="vision", users=["bob", user])
    assert runner.calls == []
