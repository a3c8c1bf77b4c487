"""The page layer's rooms: each kind of claim in a module of its own, bound into one renderer by measure/site/claims.py."""
