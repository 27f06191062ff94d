//! The system's users, for a service that drops privileges to one.

/// The uid and gid of `name` in /etc/passwd, None when there is no such user.
pub fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name)
            .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_users() {
        assert_eq!(lookup_user("root"), Some((0, 0)));
        assert_eq!(lookup_user("no-such-user-pq"), None);
    }
}
