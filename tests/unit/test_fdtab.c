/* apps/preload/fdtab.c: how long a file lives, and when its memory comes back.
 *
 * A file's descriptor numbers and the calls in it are one word (f->hold); the last of
 * them to go finishes it, and its memory goes to a pool that the next socket takes from
 * (type-stable: never freed). So a pointer kept without a hold may name another socket
 * later; exec.c's preparation keeps a hold (shim__hold) on each file it exported for as
 * long as it compares them by pointer. The rest of the shim is stubbed: finishing a file
 * is seen as its shim__uep_forget call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "apps/preload/shim.h"

static int finished;
static struct shim_file *last_finished;

/* The rest of the shim, as fdtab.c calls it. */
void shim__uep_forget(struct shim_file *f)
{
	finished++;
	last_finished = f;
}

void shim__uep_fork_child(void)
{
}

unsigned shim__generation(void)
{
	return 0;
}

int shim__adopt(int fd, struct shim_file *f, int timeout_ms)
{
	(void)fd;
	(void)f;
	(void)timeout_ms;
	return 0;
}

static int setup(void **state)
{
	(void)state;
	finished = 0;
	last_finished = NULL;
	return 0;
}

/* A socket named by fd: sd -1 (libuls has no such socket; its close says EBADF). */
static struct shim_file *named(int fd)
{
	struct shim_file *f = shim__file_new(-1, AF_INET, SOCK_STREAM, false);

	assert_non_null(f);
	assert_int_equal(shim__install(fd, f), 0);
	return f;
}

static void closed_while_a_call_is_in_it_finishes_at_the_calls_end(void **state)
{
	(void)state;
	struct shim_file *f = named(100);
	struct shim_file *g = shim__get_raw(100);

	assert_ptr_equal(g, f);
	assert_int_equal(shim__uninstall(100), 1);
	assert_int_equal(finished, 0);
	assert_null(shim__get_raw(100));
	shim__put(g);
	assert_int_equal(finished, 1);
	assert_ptr_equal(last_finished, f);
}

/* The hazard exec.c's hold is for: without a hold, a finished file's memory is the next
 * socket's, and a pointer kept from before names that socket. */
static void finished_file_memory_is_the_next_sockets(void **state)
{
	(void)state;
	struct shim_file *f = named(101);
	struct shim_file *g = shim__get_raw(101);

	assert_ptr_equal(g, f);
	shim__put(g);  /* a pointer kept, without a hold */
	assert_int_equal(shim__uninstall(101), 1);
	assert_int_equal(finished, 1);
	struct shim_file *h = named(102);
	assert_ptr_equal(h, g);
	assert_int_equal(shim__uninstall(102), 1);
}

/* exec.c export_of: a hold taken while the caller's own call is in the file outlives that
 * call; closed meanwhile, the file is finished at the hold's put and not before, and no
 * socket made meanwhile gets its memory. */
static void held_file_outlives_its_close_and_its_memory_is_not_reused(void **state)
{
	(void)state;
	struct shim_file *f = named(103);
	struct shim_file *g = shim__get_raw(103);

	shim__hold(g);
	shim__put(g);  /* the lookup's call ends; the hold stays */
	assert_int_equal(shim__uninstall(103), 1);
	assert_int_equal(finished, 0);
	struct shim_file *h = named(104);
	assert_ptr_not_equal(h, f);
	assert_int_equal(shim__uninstall(104), 1);
	assert_int_equal(finished, 1);
	assert_ptr_equal(last_finished, h);
	shim__put(f);  /* exec_undo */
	assert_int_equal(finished, 2);
	assert_ptr_equal(last_finished, f);
}

/* Two numbers (dup) and a hold: the file goes with the last of the three. */
static void hold_and_two_numbers_finish_with_the_last(void **state)
{
	(void)state;
	struct shim_file *f = named(105);

	assert_int_equal(shim__install(106, f), 0);
	struct shim_file *g = shim__get_raw(106);
	shim__hold(g);
	shim__put(g);
	assert_int_equal(shim__uninstall(105), 1);
	shim__put(f);
	assert_int_equal(finished, 0);
	assert_ptr_equal(shim__get_raw(106), f);
	shim__put(f);
	assert_int_equal(shim__uninstall(106), 1);
	assert_int_equal(finished, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(closed_while_a_call_is_in_it_finishes_at_the_calls_end, setup),
		cmocka_unit_test_setup(finished_file_memory_is_the_next_sockets, setup),
		cmocka_unit_test_setup(held_file_outlives_its_close_and_its_memory_is_not_reused,
				       setup),
		cmocka_unit_test_setup(hold_and_two_numbers_finish_with_the_last, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
