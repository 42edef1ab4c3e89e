"""The model dialog proposes a draft for the chosen target: the catalog's pair when it is on disk, else the largest
local GGUF with the same vocabulary under a quarter of the target's size, and none for an incompatible one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.gui.model import ModelDialog
from app.models.pairing import CATALOG_REASON, LOCAL_REASON, model_bytes
from app.paths import get_paths
from tests.engine.tiny_gguf import write_tiny_llama
from tests.models.models_testlib import write_gguf


@pytest.fixture
def models() -> Path:
    root = get_paths().models
    root.mkdir(parents=True, exist_ok=True)
    return root


def _target(path: Path) -> Path:
    """A tiny Llama big enough that a few-hundred-KB model with its vocabulary is well under a quarter of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_tiny_llama(path, n_embd=256, n_layer=4)


def _small(path: Path, **kwargs: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_tiny_llama(path, seed=1, **kwargs)


def _choose(qtbot, dlg: ModelDialog, target: Path) -> str:  # type: ignore[no-untyped-def]
    """Type the target's path and press Return (as leaving the field does); the proposal's note when it is in."""
    from PySide6.QtCore import Qt

    dlg.model.setText(str(target))
    qtbot.keyClick(dlg.model, Qt.Key.Key_Return)
    qtbot.waitUntil(
        lambda: dlg.draft_note.text().startswith(("Proposed draft", "No draft proposed", "Your draft")), timeout=30_000
    )
    return dlg.draft_note.text()


def test_a_same_tokenizer_model_on_disk_is_proposed_and_can_be_refused(qtbot, models: Path) -> None:  # type: ignore[no-untyped-def]
    target = _target(models / "tiny-big.gguf")
    draft = _small(models / "tiny-small.gguf", n_embd=64, n_layer=2, extra_tokens=16)  # vocab sizes may differ a bit
    _small(models / "tiny-smaller.gguf", n_embd=32, n_layer=1)  # also pairs, but smaller: not the pick
    _small(models / "tiny-medium.gguf", n_embd=192, n_layer=4)  # pairs, but not under a quarter of the target
    assert model_bytes(models / "tiny-medium.gguf") > model_bytes(target) / 4 > model_bytes(draft)
    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    note = _choose(qtbot, dlg, target)
    assert dlg.draft.text() == str(draft)
    assert note == f"Proposed draft: tiny-small.gguf ({LOCAL_REASON})."
    choice = dlg.choice()
    assert choice is not None and choice.draft == str(draft)
    dlg.no_draft_btn.click()  # "none" is one click away
    assert dlg.draft.text() == "" and dlg.draft_note.text().startswith("No draft model")
    choice = dlg.choice()
    assert choice is not None and choice.draft is None
    dlg.model.setText(str(target))
    dlg.model.editingFinished.emit()  # leaving the field again, unchanged, does not bring the proposal back
    assert dlg.draft.text() == ""


def test_the_catalogs_pair_wins_when_it_is_downloaded(qtbot, models: Path) -> None:  # type: ignore[no-untyped-def]
    target = _target(models / "me" / "tiny-GGUF" / "tiny-big.gguf")
    # The catalog's draft is not under a quarter of the target: only the catalog proposes it, and it comes first.
    paired = _small(models / "me" / "tiny-draft-GGUF" / "tiny-draft-q8.gguf", n_embd=192, n_layer=4)
    _small(models / "tiny-small.gguf", n_embd=64, n_layer=2)
    cfg = get_paths().config
    cfg.mkdir(parents=True, exist_ok=True)
    build = {"format": "F32", "sha256": None, "size": None}
    (cfg / "catalog.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "families": [
                    {
                        "id": "tiny-big",
                        "name": "Tiny big (test)",
                        "draft": {"kind": "model", "build": "tiny-draft-q8"},
                        "builds": [{"id": "tiny-big-f32", "repo": "me/tiny-GGUF", "files": ["tiny-big.gguf"], **build}],
                    },
                    {
                        "id": "tiny-draft",
                        "name": "Tiny draft (test)",
                        "builds": [
                            {
                                "id": "tiny-draft-q8",
                                "repo": "me/tiny-draft-GGUF",
                                "files": ["tiny-draft-q8.gguf"],
                                **build,
                            }
                        ],
                    },
                ],
            }
        )
    )
    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    note = _choose(qtbot, dlg, target)
    assert dlg.draft.text() == str(paired)
    assert note == f"Proposed draft: tiny-draft-q8.gguf ({CATALOG_REASON})."
    # A draft the user chose is never replaced: choosing another target keeps it and says what would pair.
    own = _small(models / "mine.gguf", n_embd=32, n_layer=1)
    dlg.draft.setText(str(own))
    assert dlg.draft_note.text() == ""
    note = _choose(qtbot, dlg, _target(models / "tiny-big-2.gguf"))
    assert note == f"Your draft is kept; proposed: tiny-small.gguf ({LOCAL_REASON})."
    assert dlg.draft.text() == str(own)


def test_no_draft_is_proposed_for_an_incompatible_vocabulary(qtbot, models: Path) -> None:  # type: ignore[no-untyped-def]
    target = _target(models / "tiny-big.gguf")
    # Small enough, but a GPT-2-style vocabulary of 64 tokens: llama.cpp would refuse the pair.
    other = write_gguf(models / "other-vocab.gguf", file_type=None, tensor_types={"token_embd.weight": 0})
    assert model_bytes(other) < model_bytes(target) / 4
    dlg = ModelDialog(None)
    qtbot.addWidget(dlg)
    note = _choose(qtbot, dlg, target)
    assert note.startswith("No draft proposed: no catalog pair on disk")
    assert dlg.draft.text() == ""
    choice = dlg.choice()
    assert choice is not None and choice.draft is None


def test_vocabularies_are_read_once_per_file_version(models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.models import pairing

    target = _target(models / "tiny-big.gguf")
    draft = _small(models / "tiny-small.gguf", n_embd=64, n_layer=2)
    reads: list[str] = []
    real = pairing.read_vocab
    monkeypatch.setattr(pairing, "read_vocab", lambda p: reads.append(Path(p).name) or real(p))
    pairing._vocab.cache_clear()
    for _ in range(3):  # choosing the same target again (or another dialog) reads no header again
        proposal = pairing.propose_draft(target, roots=[models])
        assert proposal is not None and proposal.path == draft and proposal.reason == LOCAL_REASON
    assert sorted(reads) == ["tiny-big.gguf", "tiny-small.gguf"]
    _small(draft, n_embd=64, n_layer=2, extra_tokens=8)  # rewritten: a new version is read again
    assert pairing.propose_draft(target, roots=[models]) is not None
    assert sorted(reads) == ["tiny-big.gguf", "tiny-small.gguf", "tiny-small.gguf"]


def test_load_selected_in_the_models_tab_loads_the_proposed_draft(qtbot, make_window, models: Path) -> None:  # type: ignore[no-untyped-def]
    from app.gui.main import MainWindow

    target = _target(models / "tiny-big.gguf")
    draft = _small(models / "tiny-small.gguf", n_embd=64, n_layer=2)
    w: MainWindow = make_window()
    with qtbot.waitSignal(w.models.loaded, timeout=60_000):
        w.models_panel.load_requested.emit(str(target))  # what "Load selected" sends
    choice = w.models.choice
    assert choice is not None and choice.model == str(target) and choice.draft == str(draft)
    assert "tiny-small.gguf" in w.statusBar().currentMessage() and LOCAL_REASON in w.statusBar().currentMessage()
