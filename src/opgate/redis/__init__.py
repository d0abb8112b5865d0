"""``opgate.redis``: a continuation ledger shared by several replicas, in Redis.

```python
from opgate import Registry
from opgate.redis import RedisLedger

registry = Registry(operations, policy, secret=shared_secret,
                    ledger=RedisLedger("redis://127.0.0.1:6379/0"))
```

Needs the ``redis`` extra (``pip install 'opgate[redis]'``). See docs/deployment.md.
``url_has_password(url)`` says whether a Redis URL carries a password, as redis-py
reads it (``opgate serve`` refuses one on its command line).
"""

from ._ledger import DEFAULT_LEASE, RedisLedger, url_has_password

__all__ = ["DEFAULT_LEASE", "RedisLedger", "url_has_password"]
