"""Extract–Retrieve–Generate (ERG): stylized captions for factual images from a small stylized set."""
