"""The knowledge graph: entities and relations per tenant and agent, and knowledge_graph_search."""
