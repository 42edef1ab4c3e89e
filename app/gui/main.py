"""The main window and the `run_app` / `self_check` entry points of the desktop app."""

from __future__ import annotations

import gc
import html
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, QEvent, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app import APP_NAME, __version__
from app.engine.cache_usage import DEFAULT_TOTAL_MIB
from app.engine.types import EngineError
from app.gui.binding_check import binding_refcount_problem
from app.gui.bridge import BackgroundCall
from app.gui.calibration_panel import CalibrationPanel
from app.gui.chat import ChatPanel
from app.gui.chat_request import class_label
from app.gui.endpoint import EndpointPanel
from app.gui.instance import SingleInstance
from app.gui.live import StepRing
from app.gui.model import (
    ModelChoice,
    ModelController,
    ModelDialog,
    WelcomeCard,
    backend_label,
    choice_from_json,
    choice_to_json,
    demo_path,
    profile_key,
    propose_draft_for,
)
from app.gui.models_panel import ModelsPanel
from app.gui.plots import LivePlots
from app.gui.store import open_store
from app.paths import get_paths
from app.runtime.device import FLASH_ATTN_MODES
from app.runtime.process_memory import describe as describe_memory
from app.runtime.process_memory import resident_bytes

if TYPE_CHECKING:  # the engine (and llama.cpp) is imported only where a model is loaded
    from app.engine.worker import Engine


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return default


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _bool(value: object) -> bool:
    # INI files give strings back: "true"/"false".
    return value is True or (isinstance(value, str) and value.lower() == "true")


def existing(path: str | None) -> bool:
    return bool(path) and Path(str(path)).is_file()


def gui_settings() -> QSettings:
    """GUI preferences and window state in an INI file under the config folder (so DYNADRAFT_HOME moves it)."""
    paths = get_paths()
    paths.config.mkdir(parents=True, exist_ok=True)
    return QSettings(str(paths.config / "gui.ini"), QSettings.Format.IniFormat)


class MainWindow(QMainWindow):
    """Chat (with live speculation graphs in a dock), Endpoint, Models and Calibration tabs, and a status bar.

    engine: an already-loaded Engine to use (not closed by the window); otherwise, with `autoload`, the model last
    used is loaded in the background, and on first run the window offers the bundled demo model.
    """

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        model_label: str = "",
        autoload: bool = True,
        has_draft: bool = False,
    ) -> None:
        super().__init__()
        self.setWindowTitle(f"{APP_NAME} {__version__}")
        self.settings = gui_settings()
        paths = get_paths()
        self.store = open_store(paths.history_db)  # a damaged file is moved aside, never a failed start
        self.ring = StepRing()
        self.models = ModelController(self)
        self.models.loading.connect(self._on_loading)
        self.models.loaded.connect(self._on_loaded)
        self.models.unloaded.connect(self._on_unloaded)
        self.models.failed.connect(self._on_load_failed)
        self.models.hashing.connect(self._on_hashing)

        self._build_tabs()
        self._build_graphs_dock()
        self._build_menus()
        self._build_status_bar()

        self._restore_window()
        self._start_model(engine, model_label, autoload=autoload, has_draft=has_draft)
        self._update_status()

    # -- building -----------------------------------------------------------------------------------------------------
    def _build_chat_page(self) -> QWidget:
        """The chat panel under the history note and the first-run welcome card."""
        self.chat = ChatPanel(self.store)
        self.chat.highlight.setChecked(_bool(self.settings.value("chat/highlight", False)))
        self.welcome = WelcomeCard()
        self.welcome.demo_requested.connect(self.load_demo)
        self.welcome.open_requested.connect(self.open_model_dialog)
        chat_page = QWidget()
        cl = QVBoxLayout(chat_page)
        cl.setContentsMargins(6, 6, 6, 6)
        self.history_note = QLabel("")
        self.history_note.setObjectName("history_note")
        self.history_note.setWordWrap(True)
        self.history_note.setStyleSheet("color: #8a4b00; background: #fff4e0; padding: 4px;")
        self._show_history_problems()
        cl.addWidget(self.history_note)
        cl.addWidget(self.welcome)
        cl.addWidget(self.chat, 1)
        return chat_page

    def _build_tabs(self) -> None:
        """The central tabs: Chat, Endpoint (its settings restored), Models and Calibrate."""
        chat_page = self._build_chat_page()
        self.endpoint = EndpointPanel()
        keys = ("host", "port", "api_key", "allowed_hosts")
        self.endpoint.restore({k: self.settings.value(f"endpoint/{k}") for k in keys})
        self.endpoint.state_changed.connect(lambda _on: self._update_status())
        self.models_panel = ModelsPanel()
        self.models_panel.load_requested.connect(self._load_local)
        self.models_panel.set_cache_cap_mib(int(str(self.settings.value("cache/disk_total_mib", DEFAULT_TOTAL_MIB))))
        self.models.cache_total_mib = self.models_panel.cache_cap_mib
        self.models_panel.cache_cap_changed.connect(self._set_cache_cap)
        self.calibration = CalibrationPanel(settings=self.settings)
        self.calibration.recent_text = self.recent_chats_text

        self.tabs = QTabWidget()
        self.tabs.addTab(chat_page, "Chat")
        self.tabs.addTab(self.endpoint, "Endpoint")
        self.tabs.addTab(self.models_panel, "Models")
        self.tabs.addTab(self.calibration, "Calibrate")
        self.setCentralWidget(self.tabs)

    def _build_graphs_dock(self) -> None:
        self.plots = LivePlots(self.ring)
        self.graphs_dock = QDockWidget("Live speculation", self)
        self.graphs_dock.setObjectName("graphs_dock")
        self.graphs_dock.setWidget(self.plots)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.graphs_dock)

    def _build_menus(self) -> None:
        m = self.menuBar().addMenu("&Model")
        act = QAction("&Open model…", self)
        act.setShortcut(QKeySequence.StandardKey.Open)
        act.triggered.connect(self.open_model_dialog)
        m.addAction(act)
        self.demo_action = QAction("Use the &demo model", self)
        self.demo_action.setEnabled(demo_path() is not None)
        self.demo_action.triggered.connect(self.load_demo)
        m.addAction(self.demo_action)
        self.unload_action = QAction("&Unload model", self)
        self.unload_action.setToolTip("Close the model and free its memory")
        self.unload_action.triggered.connect(self.models.unload)
        m.addAction(self.unload_action)
        m.addSeparator()
        quit_act = QAction("&Quit", self)
        quit_act.setShortcut(QKeySequence.StandardKey.Quit)
        quit_act.triggered.connect(self.close)
        m.addAction(quit_act)
        v = self.menuBar().addMenu("&View")
        v.addAction(self.graphs_dock.toggleViewAction())
        c = self.menuBar().addMenu("&Chat")
        new = QAction("&New chat", self)
        new.setShortcut(QKeySequence.StandardKey.New)
        new.triggered.connect(self.chat.new_conversation)
        c.addAction(new)
        stop = QAction("&Stop generating", self)
        stop.triggered.connect(self.chat.stop)
        c.addAction(stop)
        c.addSeparator()
        self.export_action = QAction("&Export chat…", self)
        self.export_action.triggered.connect(lambda: self.chat.export_conversation())
        c.addAction(self.export_action)
        self.import_action = QAction("&Import chat…", self)
        self.import_action.triggered.connect(self.chat.import_conversation)
        c.addAction(self.import_action)

    def _build_status_bar(self) -> None:
        """The permanent labels, kept current by the chat's replies, a 500 ms timer and an off-thread backend probe."""
        sb = self.statusBar()
        self.st_backend = QLabel("llama.cpp …")
        self.st_model = QLabel("No model")
        self.st_dd = QLabel("DD: –")
        self.st_dd.setTextFormat(Qt.TextFormat.RichText)  # its text is escaped; a link may follow
        self.st_dd.linkActivated.connect(self._calibrate_now)  # "Calibrate…" after a reply that ran without a table
        self.st_ctx = QLabel("")
        self.st_queue = QLabel("queue 0")
        self.st_endpoint = QLabel("endpoint off")
        self.st_memory = QLabel("")
        self.cancel_load_btn = QPushButton("Cancel")  # shown while a new model file is checked (models.hashing)
        self.cancel_load_btn.setToolTip("stop checking the model file and do not load it")
        self.cancel_load_btn.clicked.connect(self.models.cancel_load)
        self.cancel_load_btn.hide()
        sb.addPermanentWidget(self.cancel_load_btn)
        self.st_memory.setToolTip("this app's resident memory: a loaded model's weights and contexts")
        labels = (self.st_backend, self.st_model, self.st_ctx, self.st_dd, self.st_queue, self.st_endpoint)
        for w in (*labels, self.st_memory):
            w.setStyleSheet("padding: 0 6px;")
            sb.addPermanentWidget(w)
        self.chat.reply_finished.connect(self._on_reply)
        self.chat.reply_started.connect(self._update_status)
        self.status_timer = QTimer(self)
        self.status_timer.setInterval(500)
        self.status_timer.timeout.connect(self._update_status)
        self.status_timer.start()
        self._backend_call = BackgroundCall(backend_label, "dynadraft-gui-backend", self)
        self._backend_call.succeeded.connect(lambda s: self.st_backend.setText(str(s)))
        self._backend_call.start()

    def _start_model(self, engine: Engine | None, model_label: str, *, autoload: bool, has_draft: bool) -> None:
        """Use the engine given, or (with `autoload`) load the model used last, or the demo on first run."""
        if engine is not None:
            self.models.adopt(engine, ModelChoice(model_label or "model", demo=False))
            if model_label:
                self.st_model.setText(model_label)
            self.chat.set_engine(engine, has_draft, sources=engine.draft_sources())
        elif autoload:
            last = self._saved_choice()
            if last is None and self._first_run():
                last = self._demo_choice()  # first launch: the bundled demo model, so chat works at once
            if last is not None:
                self.models.load(last)

    def _set_cache_cap(self, mib: int) -> None:
        """The prompt cache's cap from the Models panel: remembered, and used from the next model load on."""
        self.settings.setValue("cache/disk_total_mib", mib)
        self.models.cache_total_mib = mib

    # -- models -------------------------------------------------------------------------------------------------------
    @property
    def engine(self) -> Engine | None:
        return self.models.engine

    def _saved_choice(self) -> ModelChoice | None:
        s = self.settings
        if _bool(s.value("model/demo", False)):
            return self._demo_choice()
        path = _str(s.value("model/path", ""))
        if not existing(path):
            return None
        known = self.remembered_choice(path)
        if known is not None:
            return known
        draft = _str(s.value("model/draft", "")) or None
        return ModelChoice(  # settings written before profiles were remembered per model
            path,
            draft if existing(draft) else None,
            _int(s.value("model/n_ctx", 4096), 4096),
            flash_attn=fa if (fa := _str(s.value("model/flash_attn", "auto"))) in FLASH_ATTN_MODES else "auto",
            server_binary=server if existing(server := _str(s.value("model/server_binary", ""))) else None,
        )

    def recent_chats_text(self, limit: int = 20) -> str:
        """The text of the most recent conversations, newest first: "calibrate on my recent chats"."""
        parts = []
        for conv in self.store.list_conversations()[:limit]:
            parts += [m.content for m in self.store.messages(conv.id) if m.content.strip()]
        return "\n\n".join(parts)

    def _first_run(self) -> bool:
        """No model was ever loaded (the settings remember none): the README's promise is the demo loads itself."""
        return not self.settings.contains("model/demo")

    def remembered_choice(self, model: str) -> ModelChoice | None:
        """The model with the draft, runtime and engine profile it last loaded with (None if never loaded)."""
        return choice_from_json(model, self.settings.value(profile_key(model)))

    def _demo_choice(self) -> ModelChoice | None:
        p = demo_path()
        if p is None:
            return None
        return self.remembered_choice(str(p)) or ModelChoice(str(p), demo=True)

    def load_demo(self) -> None:
        choice = self._demo_choice()
        if choice is None:
            QMessageBox.information(self, "Demo model", "The demo model is not installed in this build.")
            return
        self.models.load(choice)

    def open_model_dialog(self) -> None:
        dlg = ModelDialog(self.models.choice, self, remembered=self.remembered_choice)
        if dlg.exec():
            choice = dlg.choice()
            if choice is not None:
                self.models.load(choice)

    def _load_local(self, path: str) -> None:
        """The Models tab's "Load selected": a model loaded before gets its own remembered profile; a new one keeps
        the loaded one's settings and the draft pairing proposes (the catalog's pair, else a same-tokenizer file on
        disk), found off the UI thread (header reads) and said in the status bar (Model ▸ Load… changes it)."""
        cur = self.models.choice
        known = self.remembered_choice(path)
        self.tabs.setCurrentIndex(0)
        if known is not None:
            self.models.load(known)
            return
        base = replace(cur, model=path, draft=None, demo=False) if cur else ModelChoice(path)
        self.statusBar().showMessage(f"Looking for a draft model for {Path(path).name}…")
        call = BackgroundCall(lambda: propose_draft_for(path), "dynadraft-draft-pairing", self)
        call.succeeded.connect(lambda proposal: self._load_paired(base, proposal))
        call.failed.connect(lambda _why: self._load_paired(base, None))  # no proposal: load it alone, as before
        call.start()
        self._pairing_call = call  # keep a reference until it reports

    def _load_paired(self, choice: ModelChoice, proposal: Any) -> None:
        if proposal is not None:
            choice = replace(choice, draft=str(proposal.path))
            self.statusBar().showMessage(f"Draft model: {proposal.path.name} ({proposal.reason})", 10_000)
        else:
            self.statusBar().clearMessage()
        self.models.load(choice)

    def _on_hashing(self, name: str, done: int, total: int) -> None:
        """A first look at a new model file: its hash, which the prompt cache's identity needs, with progress."""
        text = f"Checking {name}: {done / max(total, 1):.0%} ({done / 1e9:.1f} of {total / 1e9:.1f} GB)"
        self.st_model.setText(text)
        self.welcome.set_status(text + "; once per file", busy=True)
        self.cancel_load_btn.setVisible(done < total)

    def _on_loading(self, label: str) -> None:
        self.st_model.setText(f"Loading {label}…")
        self.welcome.set_status(f"Loading {label}…", busy=True)

    def _on_unloaded(self) -> None:
        """No model now: the chat, endpoint and calibration let go of it; the status bar's RAM figure shows it freed."""
        self.chat.set_engine(None)
        self.endpoint.set_engine(None)
        self.calibration.set_engine(None)
        self.st_model.setText("No model (unloaded)")
        self.st_model.setToolTip("")
        self.statusBar().showMessage(f"Model unloaded (before: {describe_memory(resident_bytes())})", 15_000)
        self._update_status()

    def _on_loaded(self, engine: Engine, choice: ModelChoice) -> None:
        # The ring's tap runs on the engine thread for every event (GUI and endpoint requests alike): O(1) appends.
        engine.on_event = self.ring.tap
        self.cancel_load_btn.hide()
        self.chat.set_engine(engine, has_draft=bool(choice.draft), sources=engine.draft_sources())
        self.endpoint.set_engine(engine, Path(choice.model).stem)
        self.calibration.set_engine(engine)
        self.welcome.show_loaded(choice.demo)
        meta = engine.model_meta
        window = f"{meta.n_ctx // 1024}k" if meta.n_ctx % 1024 == 0 else str(meta.n_ctx)
        self.st_model.setText(f"{choice.label} · {window} ctx")
        trained = f" (trained on {meta.n_ctx_train})" if meta.n_ctx_train else ""
        self.st_model.setToolTip(
            choice.model
            + (f"\ndraft: {choice.draft}" if choice.draft else "")
            + f"\ncontext window: {meta.n_ctx} tokens{trained}"
            + "".join(f"\n{note}" for note in meta.notes)
        )
        if meta.notes:  # a window other than the one asked for is said where the user looks, not only in a tooltip
            self.statusBar().showMessage("; ".join(meta.notes), 30_000)
        if choice.server_binary:  # which per-request fields this build honours, from its /props (off-thread)
            self._runtime_call = BackgroundCall(
                lambda: engine.call(lambda runtime: runtime.status(), timeout=10), "dynadraft-gui-runtime", self
            )
            self._runtime_call.succeeded.connect(
                lambda text: self.st_model.setToolTip(f"{self.st_model.toolTip()}\nruntime: {text}")
            )
            self._runtime_call.start()
        self.chat.set_banner(
            "Demo model: SmolLM2-135M is tiny and answers at demo quality. Open your own GGUF for real work."
            if choice.demo
            else ""
        )
        self._backend_call = BackgroundCall(
            lambda: backend_label(choice.profile().n_gpu_layers), "dynadraft-gui-backend", self
        )
        self._backend_call.succeeded.connect(lambda text: self.st_backend.setText(str(text)))
        self._backend_call.start()
        self.calibration.apply_dd_toggles()
        if self.models.owned:
            s = self.settings
            s.setValue(profile_key(choice.model), choice_to_json(choice))
            s.setValue("model/demo", choice.demo)
            if not choice.demo:
                s.setValue("model/path", choice.model)
                s.setValue("model/draft", choice.draft or "")
                s.setValue("model/server_binary", choice.server_binary or "")
        self._update_status()

    def _show_context_fill(self, eng: Engine | None) -> None:
        """How full the open chat's context window is after its last reply, as LM Studio shows it; past the window,
        the oldest turns are left out (or the chat stops, as its settings say)."""
        used = self.chat.context_used()
        try:
            n_ctx = eng.model_meta.n_ctx if eng is not None else None
        except EngineError:  # still loading
            n_ctx = None
        if used is None or not n_ctx:
            self.st_ctx.setText("")
            return
        share = used / n_ctx
        self.st_ctx.setText(f"context {used:,} / {n_ctx:,} ({min(share, 9.99):.0%})")
        self.st_ctx.setStyleSheet("padding: 0 6px;" + (" color: #b35c00;" if share >= 0.9 else ""))
        self.st_ctx.setToolTip(
            "Tokens of the context window this chat's last reply used (its prompt and answer); the next turn adds "
            "your message. Past the window, the oldest turns are left out, or the chat stops (Chat settings)."
        )

    def _on_load_failed(self, message: str, choice: ModelChoice | None) -> None:
        label = choice.label if choice else "model"
        self.cancel_load_btn.hide()
        self.st_model.setText(self.models.choice.label if self.models.choice else "No model")
        if self.models.cancelled:  # the user's own Cancel: said, not a failure box
            self.welcome.set_status(f"Loading {label} cancelled", busy=False)
            return
        self.welcome.set_status(f"Could not load {label}: {message}", busy=False)
        if self.isVisible():  # open(), not exec(): the window stays responsive and the box closes with it
            box = QMessageBox(
                QMessageBox.Icon.Warning,
                "Could not load the model",
                f"{label}\n\n{message}",
                QMessageBox.StandardButton.Ok,
                self,
            )
            box.setObjectName("load_failed")
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            box.open()

    # -- status -------------------------------------------------------------------------------------------------------
    def _on_reply(self, message: Any) -> None:
        stats = getattr(message, "stats", None) or {}
        dd = stats.get("dd") or {}
        if dd:
            state = "on" if dd.get("applied") else "off"
            cls = dd.get("content_class")
            text = html.escape(f"DD {state}: {dd.get('setting')}" + (f" · {cls}" if cls else ""))
            why = f"{dd.get('reason')}" + (f"; content class {class_label(dd)}" if cls else "")
            if dd.get("reason") == "no_table":  # the engine's default ran: one click measures this device instead
                text += ' · no table, <a href="calibrate">Calibrate…</a>'
                why += f" ({dd.get('default_basis') or 'engine default'}): calibrate to let DD choose per prompt"
            self.st_dd.setText(text)
            self.st_dd.setToolTip(f"Dynamic Draft decision for the last reply: {why}")
        self._update_status()

    def _calibrate_now(self, _link: str = "") -> None:
        """The status bar's "Calibrate…": the Calibrate tab, running its quick calibration where it can."""
        self.tabs.setCurrentWidget(self.calibration)
        if self.calibration.button.isEnabled():
            self.calibration.start()

    def _update_status(self) -> None:
        eng = self.engine
        self.st_memory.setText(describe_memory(resident_bytes()))
        self.unload_action.setEnabled(eng is not None)
        self.st_queue.setText(f"queue {eng.queue_depth}" if eng is not None else "queue –")
        self._show_context_fill(eng)
        ep = self.endpoint
        if ep.server is not None:
            self.st_endpoint.setText(f"endpoint on · {ep.url.text()}")
        else:
            self.st_endpoint.setText("endpoint off")

    # -- window state -------------------------------------------------------------------------------------------------
    def _restore_window(self) -> None:
        geo = self.settings.value("window/geometry")
        if isinstance(geo, QByteArray) and not geo.isEmpty():
            self.restoreGeometry(geo)
        else:
            self.resize(1280, 800)
        state = self.settings.value("window/state")
        if isinstance(state, QByteArray) and not state.isEmpty():
            self.restoreState(state)
        else:
            self.resizeDocks([self.graphs_dock], [460], Qt.Orientation.Horizontal)  # chat gets most of the width
        tab = _int(self.settings.value("window/tab", 0), 0)
        self.tabs.setCurrentIndex(tab if 0 <= tab < self.tabs.count() else 0)

    def _show_history_problems(self) -> None:
        """Say what the chat history could not read (moved-aside file, skipped rows) instead of failing."""
        problems = self.store.problems
        self.history_note.setText("Chat history: " + "; ".join(problems) if problems else "")
        self.history_note.setVisible(bool(problems))

    def bring_to_front(self) -> None:
        """Another launch of the app handed over to this window."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    def save_settings(self) -> None:
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("window/tab", self.tabs.currentIndex())
        s.setValue("chat/highlight", self.chat.highlight.isChecked())
        for k, val in self.endpoint.settings().items():
            s.setValue(f"endpoint/{k}", val)
        s.sync()

    def closeEvent(self, e: Any) -> None:  # noqa: N802 - Qt API
        self.save_settings()
        self.status_timer.stop()
        self.plots.timer.stop()
        self.chat.shutdown()
        self.endpoint.shutdown()
        eng = self.models.engine
        if eng is not None and eng.on_event == self.ring.tap:
            eng.on_event = None
        self.models.shutdown()
        self.store.close()
        super().closeEvent(e)


def _ensure_platform() -> None:
    # With no display (CI, ssh, --self-test on a server) Qt would abort; offscreen still exercises every widget.
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _app(argv: Sequence[str] | None = None) -> QApplication:
    app = QApplication.instance()
    if isinstance(app, QApplication):
        return app
    _ensure_platform()
    app = QApplication(list(argv) if argv is not None else sys.argv[:1])
    app.setApplicationName(APP_NAME)
    app.setApplicationVersion(__version__)
    app.setOrganizationName(APP_NAME)
    # One icon and desktop id everywhere (Wayland matches windows to packaging/linux/dynadraft.desktop by it).
    icon = Path(__file__).resolve().parents[2] / "resources" / "icons" / "dynadraft.svg"
    if icon.is_file():
        app.setWindowIcon(QIcon(str(icon)))
    app.setDesktopFileName("dynadraft")
    return app


def dispose(window: QWidget) -> None:
    """Close and really delete a window now, then collect garbage.

    Plot widgets deleted while Qt is still fully up do not run their Python overrides during the interpreter's
    final garbage collection. (The abort at exit seen with PySide6 6.12.0 was its lost references to None, see
    binding_check; this only keeps shutdown orderly.)
    """
    app = QApplication.instance()
    if window.isVisible():
        window.close()
    window.deleteLater()
    if app is not None:
        app.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        app.processEvents()
    gc.collect()


def quit_on_signals(app: QApplication) -> QTimer:
    """SIGTERM (a logout, `kill`) and SIGINT (Ctrl+C in the terminal) close the app the way its window does: the
    window's close saves settings and history and stops the engine, and the exit code is 0. Python runs signal
    handlers only between bytecodes, which Qt's event loop never gives it, so a timer hands it control 5 times a
    second; the returned timer must stay referenced. quit() does nothing while no event loop runs, and a signal can
    come before `exec()` starts (a `kill` as soon as the window is mapped, while start-up finishes): so the request
    is remembered and the timer, which only fires inside an event loop, asks again until the loop has ended."""
    asked = threading.Event()

    def on_signal(*_: Any) -> None:
        asked.set()
        app.quit()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    timer = QTimer(app)
    timer.timeout.connect(lambda: app.quit() if asked.is_set() else None)
    timer.start(200)
    return timer


def run_app(argv: Sequence[str] | None = None) -> int:
    """Open the desktop app and run its event loop; returns the exit code (the `dynadraft` command's default)."""
    app = _app(argv)
    instance = SingleInstance()
    if not instance.claim():
        # The running window was asked to come forward: opening a second one would contend for the history.
        print(f"{APP_NAME} is already running; its window was brought to the front.", flush=True)
        return 0
    signal_timer = quit_on_signals(app)
    window = MainWindow()
    instance.activated.connect(window.bring_to_front)
    window.show()
    problem = binding_refcount_problem()
    if problem is not None:  # said, not fatal: the chat works until the references run out
        print(f"{APP_NAME}: {problem}", file=sys.stderr, flush=True)
        QMessageBox.warning(window, f"{APP_NAME}: Qt binding problem", problem)
    code = int(app.exec())
    signal_timer.stop()
    instance.close()
    dispose(window)
    del window
    gc.collect()
    return code


def self_check() -> str:
    """Create the main window offscreen-capable (no model), process events, close it; return a one-line report."""
    import pyqtgraph
    import PySide6

    t0 = time.perf_counter()
    app = _app()
    window = MainWindow(autoload=False)
    window.show()
    for _ in range(5):
        app.processEvents()
    title = window.windowTitle()
    tabs = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    problem = binding_refcount_problem()
    dispose(window)
    del window
    gc.collect()
    ms = (time.perf_counter() - t0) * 1000.0
    if not title.startswith(APP_NAME):
        raise RuntimeError(f"unexpected window title {title!r}")
    if problem is not None:
        raise RuntimeError(problem)
    return (
        f"GUI ok: '{title}' with {', '.join(tabs)} tabs; PySide6 {PySide6.__version__}, "
        f"pyqtgraph {pyqtgraph.__version__}, platform {app.platformName()}, {ms:.0f} ms"
    )


if __name__ == "__main__":
    raise SystemExit(run_app())
