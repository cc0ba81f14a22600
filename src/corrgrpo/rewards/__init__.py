"""Old home of the reward domains, which now live in ``corrgrpo.domains.<code|tools|agent>``."""
