"""The admission engine: pure functions from an object and a policy to a verdict."""
