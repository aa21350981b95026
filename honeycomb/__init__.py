"""Honeycomb: run LLM agents in parallel on asyncio."""
