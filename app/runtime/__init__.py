"""The bottom layer: the llama.cpp wrapper, sampling maths, devices and the llama-server process (no Qt)."""
