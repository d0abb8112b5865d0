"""``opgate.redis``: a continuation ledger shared by several replicas, in Redis.

```python
from opgate import Registry
from opgate.redis import RedisLedger

registry = Registry(operations, policy, secret=shared_secret,
                    ledger=RedisLedger("redis://127.0.0.1:6379/0"))
```

Needs the ``redis`` extra (``pip install 'opgate[redis]'``). See docs/deployment.md.
"""

from ._ledger import DEFAULT_LEASE, RedisLedger

__all__ = ["DEFAULT_LEASE", "RedisLedger"]
