"""Engine throughput: plain vs speculative decoding, against llama.cpp's own loop, samplers and grammars."""
