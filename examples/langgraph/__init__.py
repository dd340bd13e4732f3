"""Stock LangGraph apps (StateGraph over LangChain components)."""
