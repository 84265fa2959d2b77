//! Checks of decoded ids against what the receiver knows.
//!
//! Every id a message carries indexes a table on the receiving node (operators, sinks, key
//! groups, worker slots) or sizes an allocation (worker counts). A [`FrameReader`] checks each
//! decoded message with [`Validate`] against bounds the receiver supplies before anything uses
//! it, so a peer with another pipeline, a bug or hostile bytes gets a typed error naming the
//! field and value instead of panicking the receiving thread.
//!
//! [`FrameReader`]: crate::FrameReader

/// A decoded message names something the receiver does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BoundsError {
    /// An id outside `0..count`.
    #[error("{field} is {value}, outside 0..{count}")]
    Id {
        /// The message field (`Message.field`).
        field: &'static str,
        /// The value received.
        value: u64,
        /// How many the receiver has.
        count: u64,
    },
    /// An epoch further ahead of the receiver's than any legitimate sender can be.
    #[error("{field} is {value}, more than {lookahead} ahead of the receiver's epoch {current}")]
    Epoch {
        /// The message field.
        field: &'static str,
        /// The epoch received.
        value: u64,
        /// The receiver's epoch.
        current: u64,
        /// How far ahead a sender may be.
        lookahead: u64,
    },
    /// A message speaking for another node than the one its connection proved to be.
    #[error("{field} is {value}, but the connection proved to be {proven}")]
    Impersonation {
        /// The message field.
        field: &'static str,
        /// The id the message claims.
        value: u64,
        /// The id the connection proved.
        proven: u64,
    },
    /// A list whose length the receiver fixes.
    #[error("{field} has {len} entries, the receiver expects {expected}")]
    Length {
        /// The message field.
        field: &'static str,
        /// Entries received.
        len: u64,
        /// Entries expected.
        expected: u64,
    },
}

/// `value`, a sender's id in a message, must be the id its connection proved.
#[inline]
pub fn check_sender(
    field: &'static str,
    value: u64,
    proven: Option<u64>,
) -> Result<(), BoundsError> {
    match proven {
        Some(p) if p != value => Err(BoundsError::Impersonation { field, value, proven: p }),
        _ => Ok(()),
    }
}

/// A message that can be checked against bounds of type `L`.
pub trait Validate<L: ?Sized> {
    /// The first field outside `limits`, if any.
    fn validate(&self, limits: &L) -> Result<(), BoundsError>;
}

/// `value` must be below `count`.
#[inline]
pub fn check_id(field: &'static str, value: u64, count: u64) -> Result<(), BoundsError> {
    if value < count { Ok(()) } else { Err(BoundsError::Id { field, value, count }) }
}

/// `value` may be at most `lookahead` ahead of `current` (any epoch behind it is fine).
#[inline]
pub fn check_epoch(
    field: &'static str,
    value: u64,
    current: u64,
    lookahead: u64,
) -> Result<(), BoundsError> {
    if value <= current.saturating_add(lookahead) {
        Ok(())
    } else {
        Err(BoundsError::Epoch { field, value, current, lookahead })
    }
}

/// A list must have exactly `expected` entries.
#[inline]
pub fn check_len(field: &'static str, len: usize, expected: usize) -> Result<(), BoundsError> {
    if len == expected {
        Ok(())
    } else {
        Err(BoundsError::Length { field, len: len as u64, expected: expected as u64 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_accept_the_range_and_name_what_is_outside_it() {
        assert_eq!(check_id("M.id", 2, 3), Ok(()));
        assert_eq!(
            check_id("M.id", 3, 3),
            Err(BoundsError::Id { field: "M.id", value: 3, count: 3 })
        );
        assert_eq!(check_epoch("M.epoch", 0, 5, 2), Ok(()));
        assert_eq!(check_epoch("M.epoch", 7, 5, 2), Ok(()));
        let err = check_epoch("M.epoch", 8, 5, 2).unwrap_err();
        assert_eq!(err.to_string(), "M.epoch is 8, more than 2 ahead of the receiver's epoch 5");
        assert_eq!(check_epoch("M.epoch", u64::MAX, u64::MAX, 9), Ok(()));
        assert_eq!(check_len("M.list", 4, 4), Ok(()));
        assert_eq!(
            check_len("M.list", 5, 4).unwrap_err().to_string(),
            "M.list has 5 entries, the receiver expects 4"
        );
    }
}
