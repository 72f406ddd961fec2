/*
 * membership.h — membership changes and leadership transfers of the
 * cluster, asked for by operators (the admin protocol, node/admin.h) and by
 * ZooKeeper reconfig (core/client_zk.c).
 */
#ifndef KEEL_CORE_MEMBERSHIP_H
#define KEEL_CORE_MEMBERSHIP_H

enum admin_member_change {
	ADMIN_MEMBER_ADD = 1, /* learner, catch up, promote */
	ADMIN_MEMBER_ADD_LEARNER = 2,
	ADMIN_MEMBER_PROMOTE = 3,
	ADMIN_MEMBER_REMOVE = 4,
};

#endif
