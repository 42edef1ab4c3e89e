"""Conversation context: the prompt cache across turns and chats, and the rolling window of a long chat."""
