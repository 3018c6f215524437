//! Each identity's share of the server's connections, so one user cannot hold every one of
//! them (a watch holds its HTTP/1 connection for as long as it runs) and lock everyone else
//! out. A connection belongs to the first user who sends a request on it; a user who already
//! holds [`crate::Limits::max_connections_per_user`] connections is answered 429 on a new one,
//! which is then closed, so the seat goes back to others at once. All users together may hold
//! all but [`RESERVED`] connections: those stay for `system:masters` (an admin, the
//! controllers in cluster mode), who are never counted, as kube-apiserver's flow control
//! exempts them. The controllers inside the process use no connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Connections kept for `system:masters` whatever other users hold.
pub const RESERVED: usize = 64;

/// Connections held per user, and by all of them.
#[derive(Debug, Default)]
pub struct UserConnections {
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    per_user: HashMap<String, usize>,
    total: usize,
}

/// How many connections users may hold: each, and all of them together.
#[derive(Debug, Clone, Copy)]
pub struct Shares {
    pub per_user: usize,
    pub total: usize,
}

impl UserConnections {
    /// How many connections `user` holds now.
    #[cfg(test)]
    fn held_by(&self, user: &str) -> usize {
        self.held
            .lock()
            .expect("never poisoned")
            .per_user
            .get(user)
            .copied()
            .unwrap_or(0)
    }
}

/// One connection's owner, shared by every request on it (a request extension); the claim is
/// released when the connection's last handle goes.
#[derive(Clone, Default)]
pub struct ConnOwner(Arc<Mutex<Option<Claim>>>);

struct Claim {
    users: Arc<UserConnections>,
    user: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut held = self.users.held.lock().expect("never poisoned");
        held.total -= 1;
        if let Some(n) = held.per_user.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                held.per_user.remove(&self.user);
            }
        }
    }
}

impl ConnOwner {
    /// Whether `user` may send requests on this connection: it is theirs (or someone's)
    /// already, or both they and all users together hold fewer than their share and it
    /// becomes theirs.
    pub fn admit(&self, users: &Arc<UserConnections>, user: &str, shares: Shares) -> bool {
        let mut owner = self.0.lock().expect("never poisoned");
        if owner.is_some() {
            return true;
        }
        {
            let mut held = users.held.lock().expect("never poisoned");
            let mine = held.per_user.get(user).copied().unwrap_or(0);
            if mine >= shares.per_user || held.total >= shares.total {
                return false;
            }
            held.per_user.insert(user.to_string(), mine + 1);
            held.total += 1;
        }
        *owner = Some(Claim {
            users: users.clone(),
            user: user.to_string(),
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_holds_at_most_the_limit_and_gets_seats_back_when_connections_close() {
        let users = Arc::new(UserConnections::default());
        let shares = Shares {
            per_user: 2,
            total: 3,
        };
        let conns: Vec<ConnOwner> = (0..4).map(|_| ConnOwner::default()).collect();
        assert!(conns[0].admit(&users, "t", shares));
        // Further requests on a connection already held are not counted again.
        assert!(conns[0].admit(&users, "t", shares));
        assert!(conns[1].admit(&users, "t", shares));
        assert!(!conns[2].admit(&users, "t", shares));
        assert_eq!(users.held_by("t"), 2);
        // Another user is not affected, until all users together hold the total.
        assert!(conns[2].admit(&users, "u", shares));
        assert!(!conns[3].admit(&users, "v", shares));
        drop(conns);
        assert_eq!(users.held_by("t"), 0);
        assert_eq!(users.held_by("u"), 0);
        assert!(ConnOwner::default().admit(&users, "t", shares));
    }
}
