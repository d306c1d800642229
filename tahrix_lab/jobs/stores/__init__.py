"""Where jobs live: in this process (``memory``) or in Redis (``redis``, shared by processes)."""
