"""Who may do how much: the limits each user gets from their groups. (The place of the accounts'
other rules, tokens, sessions, sign-in and revocation, as they leave the doors.)"""
