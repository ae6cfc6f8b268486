"""Code mode for agent frameworks: one call turns a framework's tools into one Python tool.

Each submodule adapts one framework (installed with the ``coderun`` extra of its name):
``coderun.integrations.pydantic_ai``, ``.langchain``, ``.openai_agents``, ``.smolagents``.
"""

from ._core import CodeMode, HostTool

__all__ = ["CodeMode", "HostTool"]
