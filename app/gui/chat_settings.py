"""The per-conversation settings dialog: system prompt, sampling, thinking and speculation."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui.chat_request import CONTEXT_OVERFLOW, THINKING, chat_settings, spec_modes
from app.gui.store import Conversation
from app.speculative import registry


class ConversationSettingsDialog(QDialog):
    """System prompt, sampling, thinking and speculation settings of one conversation."""

    def __init__(
        self,
        conv: Conversation,
        has_draft: bool,
        parent: QWidget | None = None,
        sources: Collection[str] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Chat settings — {conv.title}")
        s = chat_settings(conv)
        self.system = QPlainTextEdit(conv.system_prompt)
        self.system.setPlaceholderText("Optional system prompt, e.g. “You are a concise coding assistant.”")
        self.system.setFixedHeight(90)
        self._build_sampler_fields(s)
        self._build_speculation_fields(s, has_draft, sources)
        self._build_context_and_thinking_fields(s)
        form = self._build_form()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(buttons)

    def _build_sampler_fields(self, s: dict[str, Any]) -> None:
        """Temperature through seed: how tokens are picked, how many, and from which seed."""
        self.temperature = _dspin(0, 2, 0.05, s["temperature"], "0 = greedy (deterministic)")
        self.top_p = _dspin(0.01, 1, 0.01, s["top_p"])
        self.top_k = _ispin(0, 1000, s["top_k"], "0 = off")
        self.min_p = _dspin(0, 1, 0.01, s["min_p"])
        self.repeat_penalty = _dspin(0.5, 2.0, 0.05, s["repeat_penalty"], "1 = off")
        self.dry_multiplier = _off_spin(
            "dry_multiplier",
            5,
            0.1,
            s["dry_multiplier"],
            "DRY (don't repeat yourself): a token that would extend a repeat of earlier text loses this times "
            "1.75^(length - 2) from its logit; newlines, colons, quotes and asterisks end a repeat (llama.cpp's "
            "--dry-multiplier; 0.8 is a common choice)",
        )
        self.xtc_probability = _off_spin(
            "xtc_probability",
            1,
            0.05,
            s["xtc_probability"],
            "XTC (exclude top choices): how often the likeliest tokens above the threshold are left out, all but the "
            "least likely of them, for less predictable text (llama.cpp's --xtc-probability; needs temperature > 0)",
        )
        self.xtc_threshold = _dspin(0, 0.5, 0.01, s["xtc_threshold"], "XTC's threshold (llama.cpp's --xtc-threshold)")
        self.xtc_threshold.setObjectName("xtc_threshold")
        self.xtc_threshold.setPrefix("threshold ")
        self.max_tokens = _ispin(1, 32768, s["max_tokens"])
        self.seed = QLineEdit("" if s["seed"] is None else str(s["seed"]))
        self.seed.setPlaceholderText("random")

    def _build_speculation_fields(self, s: dict[str, Any], has_draft: bool, sources: Collection[str] | None) -> None:
        """The speculation mode (sources this model can't use shown but disabled) and the draft limits."""
        self.spec_mode = QComboBox()
        self.spec_mode.setObjectName("spec_mode")
        loaded = sources if sources is not None else (["draft"] if has_draft else [])  # what the pool may choose
        for key, label in spec_modes().items():
            self.spec_mode.addItem(label, key)
            tip = None
            if key in registry.names() and not has_draft and registry.needs_draft_model(key):
                tip = "Load a draft model to use this"
            elif key in registry.names() and sources is not None and key not in sources:
                # e.g. the MTP head, offered only when the loaded GGUF carries MTP layers
                tip = f"The loaded model does not offer this ({label})"
            elif key == registry.POOL and registry.unavailable(key, loaded):
                tip = "Load a draft model (or a model with an MTP head): the pool has nothing to choose besides lookup"
            if tip:
                idx = self.spec_mode.count() - 1
                self.spec_mode.model().item(idx).setEnabled(False)  # type: ignore[attr-defined]
                self.spec_mode.setItemData(idx, tip, Qt.ItemDataRole.ToolTipRole)
        self.spec_mode.setCurrentIndex(max(0, self.spec_mode.findData(s["spec_mode"])))
        self.spec_n_max = _ispin(1, 64, s["spec_n_max"], "deepest draft per step")
        self.spec_p_min = _dspin(0, 1, 0.05, s["spec_p_min"], "stop drafting below this draft probability")
        self.spec_adaptive = QCheckBox("Adaptive length")
        self.spec_adaptive.setObjectName("spec_adaptive")
        self.spec_adaptive.setChecked(bool(s["spec_adaptive"]))
        self.spec_adaptive.setToolTip(
            "set each step's draft length from the acceptance measured so far (n_max caps it)"
        )
        self.spec_cost_stop = QCheckBox("Cost stop")
        self.spec_cost_stop.setObjectName("spec_cost_stop")
        self.spec_cost_stop.setChecked(bool(s["spec_cost_stop"]))
        self.spec_cost_stop.setToolTip(
            "stop each draft where one more token no longer pays, by this device's measured costs (instead of a "
            "fixed p_min; n_max stays the ceiling)"
        )

    def _build_context_and_thinking_fields(self, s: dict[str, Any]) -> None:
        """What a chat longer than the context does, and the reasoning model's thinking switch and budget."""
        self.context_overflow = QComboBox()
        self.context_overflow.setObjectName("context_overflow")
        for key, label in CONTEXT_OVERFLOW.items():
            self.context_overflow.addItem(label, key)
        self.context_overflow.setCurrentIndex(max(0, self.context_overflow.findData(s["context_overflow"])))
        self.context_overflow.setToolTip(
            "A chat whose history and reply no longer fit the model's context window: leave out its oldest turns "
            "(the system prompt stays; the reply says how many were left out), enough to free half the window so "
            "the next replies reuse the cached prompt and start quickly, or stop with an error"
        )
        self.thinking = QComboBox()
        self.thinking.setObjectName("thinking")
        for key, label in THINKING.items():
            self.thinking.addItem(label, key)
        self.thinking.setCurrentIndex(max(0, self.thinking.findData(s["thinking"])))
        self.thinking.setToolTip(
            "Whether a reasoning model thinks before it answers (the chat template's enable_thinking, as Qwen3's "
            "templates read it; a template without it ignores this)"
        )
        self.reasoning_budget = _ispin(-1, 131072, s["reasoning_budget"], "")
        self.reasoning_budget.setObjectName("reasoning_budget")
        self.reasoning_budget.setSpecialValueText("No limit")  # shown at the minimum, -1
        self.reasoning_budget.setSuffix(" tokens")
        self.reasoning_budget.setToolTip(
            "End the model's thinking after this many tokens: the <think> block is closed and the model answers "
            "(llama-server's --reasoning-budget; 0 ends it at once)"
        )

    def _build_form(self) -> QFormLayout:
        form = QFormLayout()
        form.addRow("System prompt", self.system)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Min-p", self.min_p)
        form.addRow("Repeat penalty", self.repeat_penalty)
        form.addRow("DRY multiplier", self.dry_multiplier)
        xtc_row = QHBoxLayout()
        xtc_row.addWidget(self.xtc_probability, 1)
        xtc_row.addWidget(self.xtc_threshold, 1)
        form.addRow("XTC probability", xtc_row)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow("Seed", self.seed)
        form.addRow("Longer than the context", self.context_overflow)
        form.addRow("Thinking", self.thinking)
        form.addRow("Thinking budget", self.reasoning_budget)
        form.addRow("Speculation", self.spec_mode)
        depth_row = QHBoxLayout()
        depth_row.addWidget(self.spec_n_max, 1)
        depth_row.addWidget(self.spec_adaptive)
        form.addRow("Draft depth (n_max)", depth_row)
        p_min_row = QHBoxLayout()
        p_min_row.addWidget(self.spec_p_min, 1)
        p_min_row.addWidget(self.spec_cost_stop)
        form.addRow("Draft p_min", p_min_row)
        return form

    def values(self) -> tuple[str, dict[str, Any]]:
        seed_text = self.seed.text().strip()
        return self.system.toPlainText(), {
            "temperature": self.temperature.value(),
            "top_p": self.top_p.value(),
            "top_k": self.top_k.value(),
            "min_p": self.min_p.value(),
            "repeat_penalty": self.repeat_penalty.value(),
            "dry_multiplier": self.dry_multiplier.value(),
            "xtc_probability": self.xtc_probability.value(),
            "xtc_threshold": self.xtc_threshold.value(),
            "max_tokens": self.max_tokens.value(),
            "seed": int(seed_text) if seed_text.lstrip("-").isdigit() else None,
            "spec_mode": self.spec_mode.currentData(),
            "spec_n_max": self.spec_n_max.value(),
            "spec_p_min": self.spec_p_min.value(),
            "spec_cost_stop": self.spec_cost_stop.isChecked(),
            "spec_adaptive": self.spec_adaptive.isChecked(),
            "context_overflow": self.context_overflow.currentData(),
            "thinking": self.thinking.currentData(),
            "reasoning_budget": self.reasoning_budget.value(),
        }


def _dspin(lo: float, hi: float, step: float, value: float, tip: str = "") -> QDoubleSpinBox:
    w = QDoubleSpinBox()
    w.setRange(lo, hi)
    w.setSingleStep(step)
    w.setDecimals(2)
    w.setValue(float(value))
    w.setToolTip(tip)
    return w


def _off_spin(name: str, hi: float, step: float, value: float, tip: str) -> QDoubleSpinBox:
    """A 0..hi box whose 0 reads "Off" (a sampler off at its neutral value)."""
    w = _dspin(0, hi, step, value, tip)
    w.setObjectName(name)
    w.setSpecialValueText("Off")
    return w


def _ispin(lo: int, hi: int, value: int, tip: str = "") -> QSpinBox:
    w = QSpinBox()
    w.setRange(lo, hi)
    w.setValue(int(value))
    w.setToolTip(tip)
    return w
