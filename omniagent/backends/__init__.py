"""Built-in policy backends. Each module registers itself; heavy imports stay inside the classes."""
