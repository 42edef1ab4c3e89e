"""DynaDraft: a desktop app for fast local LLM inference with Dynamic-Draft speculative decoding."""

__version__ = "0.1.0"
APP_NAME = "DynaDraft"
