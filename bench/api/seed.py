"""What the API benchmarks put in a fresh API's database before they measure it."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session

from perigee_api.core import security
from perigee_api.models import ApiToken, User


def read_token(db: Session, token: str) -> None:
    """The admin's first login done and a read-scoped API token `token` for it, stored as the API's token
    endpoint stores one (api/routes/users.py, create_token): the benchmarks only read."""
    admin = db.query(User).filter(User.username == "admin").one()
    admin.must_change_password = False
    db.add(
        ApiToken(
            user_id=admin.id,
            name="bench",
            token_hash=security.digest(token),
            prefix="pgt_",
            scope="read",
            created_at=time.time(),
            expires_at=time.time() + 86400,
        )
    )
    db.commit()
