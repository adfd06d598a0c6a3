/* lwIP's err_t to -errno, in exactly one place. */
#include "internal.h"

#include <errno.h>

int stk__err_to_errno(err_t err)
{
	switch (err) {
	case ERR_OK:         return 0;
	case ERR_MEM:        return -ENOMEM;
	case ERR_BUF:        return -ENOBUFS;
	case ERR_TIMEOUT:    return -ETIMEDOUT;
	case ERR_RTE:        return -EHOSTUNREACH;
	case ERR_INPROGRESS: return -EINPROGRESS;
	case ERR_VAL:        return -EINVAL;
	case ERR_WOULDBLOCK: return -EWOULDBLOCK;
	case ERR_USE:        return -EADDRINUSE;
	case ERR_ALREADY:    return -EALREADY;
	case ERR_ISCONN:     return -EISCONN;
	case ERR_CONN:       return -ENOTCONN;
	case ERR_IF:         return -ENETDOWN;
	case ERR_ABRT:       return -ECONNABORTED;
	case ERR_RST:        return -ECONNRESET;
	case ERR_CLSD:       return -ENOTCONN;
	case ERR_ARG:        return -EINVAL;
	default:             return -EIO;
	}
}
