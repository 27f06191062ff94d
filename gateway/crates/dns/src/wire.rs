//! Just enough of the DNS wire format (RFC 1035) for the gateway's own health probes: one
//! question out, the header of the answer back.

/// Record types the probes ask for.
pub const TYPE_A: u16 = 1;
pub const TYPE_NS: u16 = 2;
pub const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;
/// Recursion desired.
const FLAG_RD: u16 = 0x0100;
/// The "this is a response" bit.
const FLAG_QR: u16 = 0x8000;

/// A query message for `name` (dotted, with or without the final dot; "." is the root).
pub fn query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, String> {
    let mut m = Vec::with_capacity(32 + name.len());
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&FLAG_RD.to_be_bytes());
    // One question, no answer/authority/additional records.
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    encode_name(&mut m, name)?;
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(m)
}

fn encode_name(m: &mut Vec<u8>, name: &str) -> Result<(), String> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let start = m.len();
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() || label.len() > 63 {
                return Err(format!("{name:?}: labels must be 1-63 bytes"));
            }
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
    }
    m.push(0);
    if m.len() - start > 255 {
        return Err(format!("{name:?}: longer than 255 bytes"));
    }
    Ok(())
}

/// The fields of an answer's header the probes look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub id: u16,
    pub rcode: u8,
    pub answers: u16,
}

/// Parses the header of a response; None when `msg` is not a DNS response at all.
pub fn response_header(msg: &[u8]) -> Option<Header> {
    if msg.len() < 12 {
        return None;
    }
    let word = |i: usize| u16::from_be_bytes([msg[i], msg[i + 1]]);
    let flags = word(2);
    if flags & FLAG_QR == 0 {
        return None;
    }
    Some(Header {
        id: word(0),
        rcode: (flags & 0x000f) as u8,
        answers: word(6),
    })
}

/// A name for an rcode, for messages.
pub fn rcode_name(rcode: u8) -> &'static str {
    match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_wire_form_of_a_question() {
        let q = query(0xbeef, "www.example.", TYPE_A).unwrap();
        assert_eq!(&q[..4], &[0xbe, 0xef, 0x01, 0x00]);
        assert_eq!(&q[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&q[12..], b"\x03www\x07example\x00\x00\x01\x00\x01");
        assert_eq!(query(1, "www.example", TYPE_A).unwrap(), {
            let mut q2 = q.clone();
            q2[0] = 0;
            q2[1] = 1;
            q2
        });
        let root = query(7, ".", TYPE_NS).unwrap();
        assert_eq!(&root[12..], &[0, 0, 2, 0, 1]);
    }

    #[test]
    fn refuses_names_dns_cannot_carry() {
        assert!(query(1, "a..b", TYPE_A).is_err());
        assert!(query(1, &"x".repeat(64), TYPE_A).is_err());
        let long = vec!["a".repeat(60); 5].join(".");
        assert!(query(1, &long, TYPE_A).is_err());
    }

    #[test]
    fn reads_a_response_header() {
        let mut r = query(0x1234, "a.example", TYPE_A).unwrap();
        assert_eq!(response_header(&r), None, "a query is not a response");
        r[2] |= 0x80;
        r[3] = 0x83; // RA + NXDOMAIN
        r[7] = 2;
        assert_eq!(
            response_header(&r),
            Some(Header {
                id: 0x1234,
                rcode: 3,
                answers: 2
            })
        );
        assert_eq!(rcode_name(3), "NXDOMAIN");
        assert_eq!(response_header(&r[..11]), None);
    }
}
