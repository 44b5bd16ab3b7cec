"""Policy documents: the model, the built-in defaults and loading from YAML."""
