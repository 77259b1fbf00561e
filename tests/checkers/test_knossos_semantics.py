"""``--semantics knossos``: histories in Knossos' EDN vector layout, written here with the features of
Knossos' own test data (nil reads, ``:fail`` cas, transactions over named registers, a lock), get
Knossos' verdicts, where FORMATS.md's strict reading differs exactly where the docs say; a history with an
operation its model does not have is bad input (254) naming the models that have it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from checkers.cli import BAD_INPUT, main
from checkers.models import SEMANTICS, ModelError, get_model, models_with

# (name, model, EDN ops, verdict under strict, verdict under knossos)
HISTORIES = [
    ("nil read says nothing", "cas-register", """
     {:process 0, :type :invoke, :f :write, :value 1}
     {:process 0, :type :ok, :f :write, :value 1}
     {:process 1, :type :invoke, :f :read, :value nil}
     {:process 1, :type :ok, :f :read, :value nil}
     {:process 0, :type :invoke, :f :cas, :value [1 2]}
     {:process 0, :type :ok, :f :cas, :value [1 2]}
     {:process 1, :type :invoke, :f :read, :value nil}
     {:process 1, :type :ok, :f :read, :value 2}""", "invalid", "valid"),
    ("every fail dropped", "cas-register", """
     {:process 0, :type :invoke, :f :write, :value 1}
     {:process 0, :type :ok, :f :write, :value 1}
     {:process 1, :type :invoke, :f :cas, :value [1 3]}
     {:process 1, :type :fail, :f :cas, :value [1 3], :error :cas-mismatch}
     {:process 0, :type :invoke, :f :read, :value nil}
     {:process 0, :type :ok, :f :read, :value 1}""", "invalid", "valid"),
    ("a read of a value never written", "cas-register", """
     {:process 0, :type :invoke, :f :write, :value 1}
     {:process 0, :type :ok, :f :write, :value 1}
     {:process 1, :type :invoke, :f :read, :value nil}
     {:process 1, :type :ok, :f :read, :value 4}""", "invalid", "invalid"),
    ("an info write may land later", "register", """
     {:process 0, :type :invoke, :f :write, :value 1}
     {:process 0, :type :info, :f :write, :value 1}
     {:process 1, :type :invoke, :f :read, :value nil}
     {:process 1, :type :ok, :f :read, :value nil}
     {:process 1, :type :invoke, :f :read, :value nil}
     {:process 1, :type :ok, :f :read, :value 1}""", "valid", "valid"),
    ("a transaction's nil micro-read", "multi-register", """
     {:process 0, :type :invoke, :f :txn, :value [[:w :x 1] [:w :y 1]]}
     {:process 0, :type :ok, :f :txn, :value [[:w :x 1] [:w :y 1]]}
     {:process 1, :type :invoke, :f :txn, :value [[:r :x nil] [:r :y nil]]}
     {:process 1, :type :ok, :f :txn, :value [[:r :x 1] [:r :y nil]]}""", "invalid", "valid"),
    ("a transaction reads a stale register", "multi-register", """
     {:process 0, :type :invoke, :f :txn, :value [[:w :x 1] [:w :y 1]]}
     {:process 0, :type :ok, :f :txn, :value [[:w :x 1] [:w :y 1]]}
     {:process 0, :type :invoke, :f :txn, :value [[:w :x 2]]}
     {:process 0, :type :ok, :f :txn, :value [[:w :x 2]]}
     {:process 1, :type :invoke, :f :txn, :value [[:r :x nil] [:r :y nil]]}
     {:process 1, :type :ok, :f :txn, :value [[:r :x 1] [:r :y 1]]}""", "invalid", "invalid"),
    ("a lock taken twice", "mutex", """
     {:process 0, :type :invoke, :f :acquire, :value nil}
     {:process 0, :type :ok, :f :acquire, :value nil}
     {:process 1, :type :invoke, :f :acquire, :value nil}
     {:process 1, :type :ok, :f :acquire, :value nil}""", "invalid", "invalid"),
    ("a lock passed on", "mutex", """
     {:process 0, :type :invoke, :f :acquire, :value nil}
     {:process 0, :type :ok, :f :acquire, :value nil}
     {:process 1, :type :invoke, :f :acquire, :value nil}
     {:process 0, :type :invoke, :f :release, :value nil}
     {:process 0, :type :ok, :f :release, :value nil}
     {:process 1, :type :ok, :f :acquire, :value nil}""", "valid", "valid"),
]
EXIT = {"valid": 0, "invalid": 1}


def _check(path: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["check", str(path), "--checker", "linearizable", "--independent", "no", "--workers", "1", *args],
                out, err)
    return code, out.getvalue(), err.getvalue()


def _write(tmp_path: Path, ops: str) -> Path:
    path = tmp_path / "history.edn"
    path.write_text("[" + ops.strip() + "]\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "model", "ops", "strict", "knossos"), HISTORIES, ids=[h[0] for h in HISTORIES])
def test_each_semantics_gives_its_verdict(tmp_path: Path, name: str, model: str, ops: str, strict: str,
                                          knossos: str) -> None:
    path = _write(tmp_path, ops)
    for semantics, expected in (("strict", strict), ("knossos", knossos)):
        code, out, err = _check(path, "--model", model, "--semantics", semantics)
        assert code == EXIT[expected], (semantics, out, err)
        assert f": linearizable: {expected}:" in out


def test_the_corpus_shows_every_difference_both_ways() -> None:
    """The histories above cover each rule the knossos semantics changes, in each model it changes."""
    differing = {model for _, model, _, strict, knossos in HISTORIES if strict != knossos}
    assert differing == {"cas-register", "multi-register"}
    assert {model for _, model, *_ in HISTORIES} >= differing | {"mutex", "register"}
    assert SEMANTICS == ("strict", "knossos")


def test_a_wrong_model_is_bad_input_naming_the_models_that_fit(tmp_path: Path) -> None:
    path = _write(tmp_path, HISTORIES[0][2])
    code, out, err = _check(path, "--model", "register")
    assert code == BAD_INPUT and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "f 'cas' is not part of the register model (read, write); models with 'cas': " in err
    assert set(models_with("cas")) >= {"cas-register"} and "register" not in models_with("cas")


def test_unknown_semantics_is_refused() -> None:
    with pytest.raises(ModelError, match="unknown semantics 'jepsen'"):
        get_model("register", semantics="jepsen")


def test_an_empty_history_is_unknown_here_and_valid_as_knossos_judges_it(tmp_path: Path) -> None:
    # (Knossos' data/cas-register/good/mongodb-v0-ack-rollback-.edn holds only nemesis events.)
    path = tmp_path / "history.edn"
    path.write_text('[{:process :nemesis, :type :info, :f :start}, {:process :nemesis, :type :info, :f :stop}]\n',
                    encoding="utf-8")
    code, out, _ = _check(path, "--model", "cas-register")
    assert code == 2 and "Knossos and Porcupine call such a history valid" in out
    for model in ("cas-register", "mutex"):
        code, out, _ = _check(path, "--model", model, "--semantics", "knossos")
        assert code == 0 and "no client operations, which Knossos (and Porcupine) call valid" in out
